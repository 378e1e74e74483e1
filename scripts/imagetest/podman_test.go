//go:build imagetest

package imagetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pods runs the containers of rendered pod specs in podman, the way a
// kubelet would run them on one node: with host networking, exactly the
// spec's command, args and environment, its ConfigMap and Secret volumes
// written out and mounted read-only, its emptyDirs as tmpfs, and its user,
// read-only root filesystem, capabilities, privilege escalation and memory
// and CPU limits.
type pods struct {
	m       *manifests
	secrets map[string]map[string]string // Secret name -> key -> value, the Secrets the chart expects to exist
	dir     string                       // where volumes are written
	prefix  string                       // of the podman container names
}

// command returns the podman command that runs container c of workload o
// in the foreground (podman's exit status is the container's), named
// prefix-name. entrypoint, when given, replaces the spec's command and args
// (to run another binary with the pod's environment and files).
func (p *pods) command(tb testing.TB, name string, o *object, c *container, entrypoint ...string) *exec.Cmd {
	tb.Helper()
	pod := &o.Spec.Template.Spec
	cname := p.prefix + "-" + name
	args := []string{"run", "--rm", "--name", cname, "--network", "host", "--pull", "never"}

	sec, err := securityArgs(&pod.SecurityContext, &c.SecurityContext)
	require.NoError(tb, err, "%s: security context", name)
	args = append(args, sec...)
	res, err := resourceArgs(c.Resources.Limits)
	require.NoError(tb, err, "%s: resources", name)
	args = append(args, res...)

	env, err := p.env(c)
	require.NoError(tb, err, "%s: environment", name)
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	cmdEnv := os.Environ()
	for _, k := range names {
		// By name only: podman takes the value from its own environment,
		// so secrets stay off its command line.
		args = append(args, "--env", k)
		cmdEnv = append(cmdEnv, k+"="+env[k])
	}

	mounts, err := p.mounts(name, pod, c)
	require.NoError(tb, err, "%s: volumes", name)
	args = append(args, mounts...)

	command, cargs := c.Command, c.Args
	if len(entrypoint) > 0 {
		command, cargs = entrypoint[:1], entrypoint[1:]
	}
	if len(command) > 0 {
		ep, err := json.Marshal(command)
		require.NoError(tb, err)
		args = append(args, "--entrypoint", string(ep))
	}
	args = append(args, c.Image)
	args = append(args, cargs...)

	tb.Cleanup(func() { _ = exec.Command("podman", "rm", "--force", "--ignore", cname).Run() })
	cmd := exec.Command("podman", args...)
	cmd.Env = cmdEnv
	return cmd
}

// env resolves the container's environment as the kubelet does: envFrom in
// order, then env, later names overriding earlier ones.
func (p *pods) env(c *container) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil:
			values, ok := p.secrets[from.SecretRef.Name]
			if !ok && !from.SecretRef.Optional {
				return nil, fmt.Errorf("envFrom: no Secret %q", from.SecretRef.Name)
			}
			for k, v := range values {
				env[from.Prefix+k] = v
			}
		case from.ConfigMapRef != nil:
			cm, ok := p.m.get("ConfigMap", from.ConfigMapRef.Name)
			if !ok && !from.ConfigMapRef.Optional {
				return nil, fmt.Errorf("envFrom: no ConfigMap %q", from.ConfigMapRef.Name)
			}
			if ok {
				for k, v := range cm.Data {
					env[from.Prefix+k] = v
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			if strings.Contains(e.Value, "$(") {
				return nil, fmt.Errorf("env %s: $(VAR) references are not supported here", e.Name)
			}
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := p.secrets[ref.Name][ref.Key]
			if !ok && !ref.Optional {
				return nil, fmt.Errorf("env %s: Secret %q has no key %q", e.Name, ref.Name, ref.Key)
			}
			if ok {
				env[e.Name] = v
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, _ := p.m.get("ConfigMap", ref.Name)
			v, ok := "", false
			if cm != nil {
				v, ok = cm.Data[ref.Key]
			}
			if !ok && !ref.Optional {
				return nil, fmt.Errorf("env %s: ConfigMap %q has no key %q", e.Name, ref.Name, ref.Key)
			}
			if ok {
				env[e.Name] = v
			}
		default:
			return nil, fmt.Errorf("env %s: this valueFrom is not supported here", e.Name)
		}
	}
	return env, nil
}

// mounts writes the pod's ConfigMap and Secret volumes that c mounts into
// files (mode 0644, as the kubelet's default) and returns podman's mount
// arguments for each of c's volumeMounts.
func (p *pods) mounts(name string, pod *podSpec, c *container) ([]string, error) {
	var args []string
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v volume) bool { return v.Name == vm.Name })
		if i < 0 {
			return nil, fmt.Errorf("volumeMount %s: no such volume", vm.Name)
		}
		v := &pod.Volumes[i]
		if v.EmptyDir != nil {
			opt := "type=tmpfs,destination=" + vm.MountPath + ",tmpfs-mode=1777"
			if v.EmptyDir.SizeLimit != "" {
				size, err := quantity(v.EmptyDir.SizeLimit)
				if err != nil {
					return nil, fmt.Errorf("volume %s: sizeLimit: %w", v.Name, err)
				}
				opt += ",tmpfs-size=" + strconv.FormatInt(int64(size), 10)
			}
			args = append(args, "--mount", opt)
			continue
		}
		files, err := p.volumeFiles(v)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(p.dir, name, v.Name)
		if err := writeVolume(dir, files); err != nil {
			return nil, err
		}
		src := dir
		if vm.SubPath != "" {
			src = filepath.Join(dir, vm.SubPath)
		}
		// The kubelet mounts ConfigMap and Secret volumes read-only whatever
		// the mount says.
		args = append(args, "--volume", src+":"+vm.MountPath+":ro")
	}
	return args, nil
}

// volumeFiles returns a ConfigMap's or Secret's volume contents, by path.
func (p *pods) volumeFiles(v *volume) (map[string]string, error) {
	var data map[string]string
	var items []keyPath
	switch {
	case v.ConfigMap != nil:
		cm, ok := p.m.get("ConfigMap", v.ConfigMap.Name)
		if !ok {
			return nil, fmt.Errorf("volume %s: no ConfigMap %q in the rendered manifests", v.Name, v.ConfigMap.Name)
		}
		data, items = cm.Data, v.ConfigMap.Items
	case v.Secret != nil:
		values, ok := p.secrets[v.Secret.SecretName]
		if !ok {
			return nil, fmt.Errorf("volume %s: no Secret %q", v.Name, v.Secret.SecretName)
		}
		data, items = values, v.Secret.Items
	default:
		return nil, fmt.Errorf("volume %s: only configMap, secret and emptyDir volumes are supported here", v.Name)
	}
	files := map[string]string{}
	if len(items) == 0 {
		for k, val := range data {
			files[k] = val
		}
		return files, nil
	}
	for _, it := range items {
		val, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("volume %s: no key %q", v.Name, it.Key)
		}
		files[it.Path] = val
	}
	return files, nil
}

func writeVolume(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// MkdirAll leaves an existing folder's mode, and the test's temporary
	// folder is private: the container's user must get through.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// securityArgs maps the pod's and the container's security contexts (the
// container's fields win) to podman's flags.
func securityArgs(pod, c *securityContext) ([]string, error) {
	uid := cmpPtr(c.RunAsUser, pod.RunAsUser)
	gid := cmpPtr(c.RunAsGroup, pod.RunAsGroup)
	nonRoot := cmpPtr(c.RunAsNonRoot, pod.RunAsNonRoot)
	var args []string
	if nonRoot != nil && *nonRoot && (uid == nil || *uid == 0) {
		return nil, fmt.Errorf("runAsNonRoot without a non-zero runAsUser (uid %v)", uid)
	}
	if uid != nil {
		user := strconv.FormatInt(*uid, 10)
		if gid != nil {
			user += ":" + strconv.FormatInt(*gid, 10)
		}
		args = append(args, "--user", user)
	}
	if pod.FSGroup != nil {
		args = append(args, "--group-add", strconv.FormatInt(*pod.FSGroup, 10))
	}
	if ro := c.ReadOnlyRootFilesystem; ro != nil && *ro {
		args = append(args, "--read-only", "--read-only-tmpfs=false")
	}
	if ape := c.AllowPrivilegeEscalation; ape != nil && !*ape {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	for _, name := range c.Capabilities.Drop {
		args = append(args, "--cap-drop", strings.ToLower(name))
	}
	for _, name := range c.Capabilities.Add {
		args = append(args, "--cap-add", strings.ToLower(name))
	}
	switch t := cmp.Or(c.SeccompProfile.Type, pod.SeccompProfile.Type); t {
	case "", "RuntimeDefault":
		// podman's default profile.
	case "Unconfined":
		args = append(args, "--security-opt", "seccomp=unconfined")
	default:
		return nil, fmt.Errorf("seccompProfile %q is not supported here", t)
	}
	return args, nil
}

// resourceArgs maps a container's limits to podman's --memory and --cpus.
func resourceArgs(limits map[string]string) ([]string, error) {
	var args []string
	if mem, ok := limits["memory"]; ok {
		b, err := quantity(mem)
		if err != nil {
			return nil, fmt.Errorf("limits.memory: %w", err)
		}
		args = append(args, "--memory", strconv.FormatInt(int64(b), 10))
	}
	if cpu, ok := limits["cpu"]; ok {
		n, err := quantity(cpu)
		if err != nil {
			return nil, fmt.Errorf("limits.cpu: %w", err)
		}
		args = append(args, "--cpus", strconv.FormatFloat(n, 'f', -1, 64))
	}
	return args, nil
}

// quantity parses a Kubernetes quantity ("64Mi", "1G", "500m", "2").
func quantity(s string) (float64, error) {
	suffixes := []struct {
		s string
		f float64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"m", 1e-3},
	}
	for _, suf := range suffixes {
		if num, ok := strings.CutSuffix(s, suf.s); ok {
			n, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("quantity %q: %w", s, err)
			}
			return n * suf.f, nil
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("quantity %q: %w", s, err)
	}
	return n, nil
}

func cmpPtr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}
