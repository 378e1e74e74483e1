//go:build imagetest

package imagetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// object is the part of a rendered Kubernetes object that running its pod
// needs: a ConfigMap's data, a Deployment's or Job's pod
// template.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64          `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               securityContext `yaml:"securityContext"`
	Containers                    []container     `yaml:"containers"`
	InitContainers                []container     `yaml:"initContainers"`
	Volumes                       []volume        `yaml:"volumes"`
}

// grace is the pod's termination grace period: Kubernetes' default, 30
// seconds, when the spec leaves it out.
func (p *podSpec) grace() int64 {
	if p.TerminationGracePeriodSeconds == nil {
		return 30
	}
	return *p.TerminationGracePeriodSeconds
}

// securityContext holds the fields of a pod's and a container's security
// context that podman can apply.
type securityContext struct {
	RunAsUser                *int64 `yaml:"runAsUser"`
	RunAsGroup               *int64 `yaml:"runAsGroup"`
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	FSGroup                  *int64 `yaml:"fsGroup"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Add  []string `yaml:"add"`
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
			ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		Prefix       string  `yaml:"prefix"`
		SecretRef    *objRef `yaml:"secretRef"`
		ConfigMapRef *objRef `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext securityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type objRef struct {
	Name     string `yaml:"name"`
	Optional bool   `yaml:"optional"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string     `yaml:"name"`
		Items []keyPath  `yaml:"items"`
		Mode  *yaml.Node `yaml:"defaultMode"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string    `yaml:"secretName"`
		Items      []keyPath `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir *struct {
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
}

type keyPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

// port resolves a probe's port, a number or the name of one of c's ports.
func (c *container) port(p *probe) (int, error) {
	if p == nil || p.HTTPGet == nil {
		return 0, errors.New("no httpGet probe")
	}
	n := &p.HTTPGet.Port
	if v, err := strconv.Atoi(n.Value); err == nil {
		return v, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == n.Value {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, n.Value)
}

// manifests are the objects of one rendering, by kind and name.
type manifests struct {
	objects []*object
}

func parseManifests(rendered []byte) (*manifests, error) {
	dec := yaml.NewDecoder(bytes.NewReader(rendered))
	m := &manifests{}
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("rendered manifests: %w", err)
		}
		if o.Kind != "" {
			m.objects = append(m.objects, &o)
		}
	}
}

// get returns the object of kind named name.
func (m *manifests) get(kind, name string) (*object, bool) {
	for _, o := range m.objects {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return nil, false
}

// workload returns the Deployment or Job whose pod has a container named
// name, and that container.
func (m *manifests) workload(kind, name string) (*object, *container, error) {
	for _, o := range m.objects {
		if o.Kind != kind {
			continue
		}
		for i := range o.Spec.Template.Spec.Containers {
			if c := &o.Spec.Template.Spec.Containers[i]; c.Name == name {
				return o, c, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("no %s with a container named %q in the rendered manifests", kind, name)
}
