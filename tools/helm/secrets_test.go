package helm_test

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// secretsDir is where the chart mounts existingSecret's files.
const secretsDir = "/run/secrets/hookinbox"

// TestSecretsFilesAreMountedWhole checks, for every value set, that each
// source's secrets_file is a file of the receiver's Secret mounted in the
// receiver's pods through a directory mount, never a subPath (the kubelet
// does not update a subPath mount, so a rotated secret would never arrive),
// that they get no key beyond those the sources name, and that the worker's
// pods (which do not verify) get none.
func TestSecretsFilesAreMountedWhole(t *testing.T) {
	t.Parallel()
	for _, file := range valueSets(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			r := mustRender(t, []string{file}, nil)
			want := map[string]bool{}
			sources, _ := r.config["sources"].([]any)
			for _, s := range sources {
				f, _ := s.(map[string]any)["secrets_file"].(string)
				if f == "" {
					continue
				}
				if path.Dir(f) != secretsDir {
					t.Errorf("secrets_file %s is not in %s", f, secretsDir)
				}
				want[path.Base(f)] = true
			}
			for component, want := range map[string]map[string]bool{"receiver": want, "worker": {}} {
				d := r.deployments[component]
				if d == nil {
					t.Fatalf("no %s Deployment", component)
				}
				checkSecretsMount(t, component, &d.Spec.Template.Spec, want)
			}
		})
	}
}

func checkSecretsMount(t *testing.T, component string, spec *corev1.PodSpec, want map[string]bool) {
	t.Helper()
	volumes := map[string]*corev1.Volume{}
	for i := range spec.Volumes {
		volumes[spec.Volumes[i].Name] = &spec.Volumes[i]
	}
	mounted := map[string]bool{}
	for _, m := range spec.Containers[0].VolumeMounts {
		v := volumes[m.Name]
		if v == nil || v.Secret == nil {
			continue
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			t.Errorf("%s: Secret volume %s is mounted through a subPath, which the kubelet never updates", component, m.Name)
		}
		if !m.ReadOnly {
			t.Errorf("%s: Secret volume %s is not mounted read-only", component, m.Name)
		}
		if m.MountPath != secretsDir {
			continue
		}
		for _, item := range v.Secret.Items {
			if item.Key != item.Path {
				t.Errorf("%s: key %s is mounted as %s, not under its own name", component, item.Key, item.Path)
			}
			mounted[item.Path] = true
		}
	}
	for key := range want {
		if !mounted[key] {
			t.Errorf("%s: secrets_file %s/%s is not mounted from existingSecret", component, secretsDir, key)
		}
	}
	for key := range mounted {
		if !want[key] {
			t.Errorf("%s: key %s is mounted but no source reads it", component, key)
		}
	}
}

// TestDefaultSourcesRotateWithoutARestart: the default values read every
// source's signing secrets from a file, not from the environment (read
// once, at start).
func TestDefaultSourcesRotateWithoutARestart(t *testing.T) {
	t.Parallel()
	r := mustRender(t, []string{filepath.Join(chartDir, "ci", "default-values.yaml")}, nil)
	sources, _ := r.config["sources"].([]any)
	if len(sources) == 0 {
		t.Fatal("no source in the default config")
	}
	for _, s := range sources {
		src := s.(map[string]any)
		if _, ok := src["secrets"]; ok || src["secrets_file"] == nil {
			t.Errorf("source %v: its secrets must come from a secrets_file, not the environment", src["name"])
		}
	}
}

func TestSecretsFileOutsideTheMountIsRefused(t *testing.T) {
	t.Parallel()
	defaults := []string{filepath.Join(chartDir, "ci", "default-values.yaml")}
	for _, f := range []string{"/etc/secrets/stripe", secretsDir + "/", secretsDir + "/../stripe", secretsDir + "/a/b"} {
		_, err := render(t, defaults, map[string]any{
			"config.sources": []any{map[string]any{"name": "stripe", "provider": "stripe", "secrets_file": f}},
		}, false)
		if err == nil || !strings.Contains(err.Error(), "config.sources[0].secrets_file must be "+secretsDir+"/KEY") {
			t.Errorf("secrets_file %q: want it refused, got %v", f, err)
		}
	}
}
