//go:build imagetest

// Package imagetest runs hookinbox's container image the way Kubernetes runs
// the chart's pods, in podman on this machine: the rendered migration Job,
// receiver and worker containers, with exactly their command, args,
// environment, mounted ConfigMap and Secret files and security context,
// against the local PostgreSQL. `make image-test` (scripts/image-test.sh)
// builds the image and runs it with the build tag imagetest.
package imagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// secretName is the existingSecret the chart is rendered with; the test
// plays the part of the operator who created it.
const secretName = "hookinbox-image-test"

// readyTimeout bounds a container's wait to pass its readiness probe, and
// the wait for the worker to process the delivery.
const readyTimeout = 2 * time.Minute

// root is the repository's root, from this package's folder.
var root = filepath.Join("..", "..")

// image returns the image under test, skipping the test where podman is
// not installed.
func image(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed, and .ci/run installs it (Debian's podman and runc) only as root with apt-get: " + err.Error())
	}
	ref := os.Getenv("HOOKINBOX_TEST_IMAGE")
	if ref == "" {
		t.Fatal("HOOKINBOX_TEST_IMAGE is not set: run `make image-test`, which builds the image and names it")
	}
	return ref
}

func TestImageContents(t *testing.T) {
	t.Parallel()
	ref := image(t)

	t.Run("RunsAsNumericNonRootUser", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command("podman", "image", "inspect", "--format", "{{.Config.User}}", ref).Output()
		require.NoError(t, err)
		require.Equal(t, "65532:65532", strings.TrimSpace(string(out)))
	})

	t.Run("BinariesCarryTheStampedVersion", func(t *testing.T) {
		t.Parallel()
		want := os.Getenv("HOOKINBOX_TEST_VERSION")
		require.NotEmpty(t, want, "HOOKINBOX_TEST_VERSION is not set: run `make image-test`")
		for _, bin := range []string{"receiver", "worker", "inboxctl"} {
			code, out := proctest.Run(t, exec.Command("podman", "run", "--rm", "--pull", "never", "--network", "none",
				"--entrypoint", `["/`+bin+`"]`, ref, "--version"))
			require.Equal(t, 0, code, out)
			require.Equal(t, bin+" "+want, strings.TrimSpace(out))
		}
	})

	t.Run("HasNoShell", func(t *testing.T) {
		t.Parallel()
		code, out := proctest.Run(t, exec.Command("podman", "run", "--rm", "--pull", "never", "--network", "none",
			"--entrypoint", `["/bin/sh"]`, ref, "-c", "true"))
		require.NotEqual(t, 0, code, out)
		require.Contains(t, out, "/bin/sh")
	})
}

// TestPodsRunAsRendered is the demo's flow in the image: the migration Job
// runs, the receiver and the worker pass their readiness probes, a delivery
// signed by inboxctl (the image's own, with the receiver pod's config and
// secrets) reaches the receiver container and is processed by the worker
// container, and SIGTERM ends each within its grace period.
func TestPodsRunAsRendered(t *testing.T) {
	t.Parallel()
	ref := image(t)
	db := dbtest.NewEmpty(t)
	receiverPort, workerPort := freePort(t), freePort(t)
	rendered, from := render(t, ref, receiverPort, workerPort)
	t.Logf("pod specs: %s", from)
	m, err := parseManifests(rendered)
	require.NoError(t, err)

	secrets := map[string]string{"DATABASE_URL": db.URL}
	for name := range referencedVariables(m) {
		if _, ok := secrets[name]; !ok {
			secrets[name] = "whsec_" + randomHex(t, 24)
		}
	}
	p := &pods{m: m, secrets: map[string]map[string]string{secretName: secrets}, dir: t.TempDir(), prefix: "hookinbox-it-" + randomHex(t, 4)}

	migrateJob, migrate, err := m.workload("Job", "migrate")
	require.NoError(t, err)
	receiverDeploy, receiver, err := m.workload("Deployment", "receiver")
	require.NoError(t, err)
	workerDeploy, worker, err := m.workload("Deployment", "worker")
	require.NoError(t, err)
	for _, c := range []*container{migrate, receiver, worker} {
		require.Equal(t, ref, c.Image, "container %s runs the image under test", c.Name)
	}

	start := time.Now()
	code, out := proctest.Run(t, p.command(t, "migrate", migrateJob, migrate))
	require.Equal(t, 0, code, "migration Job's container:\n%s", out)
	var migrated bool
	require.NoError(t, db.Pool.QueryRow(context.Background(), "SELECT to_regclass('webhook_inbox') IS NOT NULL").Scan(&migrated))
	require.True(t, migrated, "the migration created webhook_inbox")
	t.Logf("migration: done in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	receiverProc := proctest.Start(t, p.command(t, "receiver", receiverDeploy, receiver))
	workerProc := proctest.Start(t, p.command(t, "worker", workerDeploy, worker))
	for _, pc := range []struct {
		c    *container
		proc *proctest.Process
	}{{receiver, receiverProc}, {worker, workerProc}} {
		url := probeURL(t, pc.c, pc.c.ReadinessProbe)
		pc.proc.WaitUntil(t, readyTimeout, func() bool { return get(url) == http.StatusOK })
		if pc.c.LivenessProbe != nil {
			require.Equal(t, http.StatusOK, get(probeURL(t, pc.c, pc.c.LivenessProbe)), "%s's liveness probe", pc.c.Name)
		}
		t.Logf("%s: ready (%s) %s after start", pc.c.Name, url, time.Since(start).Round(time.Millisecond))
	}

	source := firstSource(t, m)
	eventID := "evt_image_" + randomHex(t, 6)
	body := fmt.Sprintf(`{"id":%q,"object":"event","type":"image.test","created":%d,"data":{"object":{}}}`, eventID, time.Now().Unix())
	start = time.Now()
	send := []string{"/inboxctl", "send"}
	if path := configFlag(receiver); path != "" {
		send = append(send, "--config", path)
	}
	send = append(send, "--source", source, "--id", eventID, "--type", "image.test", "--data", body,
		"--url", fmt.Sprintf("http://127.0.0.1:%d", receiverPort))
	code, out = proctest.Run(t, p.command(t, "send", receiverDeploy, receiver, send...))
	require.Equal(t, 0, code, "inboxctl send:\n%s", out)
	workerProc.WaitUntil(t, readyTimeout, func() bool {
		var status string
		err := db.Pool.QueryRow(context.Background(),
			"SELECT status FROM webhook_inbox WHERE source = $1 AND event_id = $2", source, eventID).Scan(&status)
		return err == nil && status == "done"
	})
	t.Logf("delivery %s/%s: accepted (%s) and done %s after sending", source, eventID, strings.TrimSpace(out), time.Since(start).Round(time.Millisecond))

	for _, pc := range []struct {
		o    *object
		c    *container
		proc *proctest.Process
	}{{receiverDeploy, receiver, receiverProc}, {workerDeploy, worker, workerProc}} {
		grace := time.Duration(pc.o.Spec.Template.Spec.grace()) * time.Second
		start := time.Now()
		code := pc.proc.Terminate(t)
		took := time.Since(start)
		require.Equal(t, 0, code, "%s's exit status after SIGTERM (output below)", pc.c.Name)
		require.Less(t, took, grace, "%s ended after SIGTERM within its grace period", pc.c.Name)
		t.Logf("%s: SIGTERM ended it in %s (grace period %s)", pc.c.Name, took.Round(time.Millisecond), grace)
	}
}

// render renders the chart with the image under test, the test's Secret and
// the given ports, through Helm from tools/helm, adding helm's extra
// arguments (e.g. "-f", a values file); without a chart in the repository,
// it fills testdata/pods.yaml.tmpl instead, which takes no extra arguments.
// It returns the manifests and where they came from.
func render(t *testing.T, ref string, receiverPort, workerPort int, extra ...string) ([]byte, string) {
	t.Helper()
	chart := filepath.Join(root, "charts", "hookinbox")
	if exists(filepath.Join(chart, "Chart.yaml")) && exists(filepath.Join(root, "tools", "helm", "go.mod")) {
		slash := max(strings.LastIndex(ref, "/"), 0)
		colon := strings.LastIndex(ref[slash:], ":")
		require.Positive(t, colon, "image %q has no tag", ref)
		repo, tag := ref[:slash+colon], ref[slash+colon+1:]
		goBin := os.Getenv("GO")
		if goBin == "" {
			goBin = "go"
		}
		args := []string{"tool", "-modfile=tools/helm/go.mod", "helm", "template", "hookinbox", "charts/hookinbox",
			"--set-string", "image.repository=" + repo, "--set-string", "image.tag=" + tag,
			"--set-string", "existingSecret=" + secretName,
			"--set", fmt.Sprintf("receiver.port=%d", receiverPort), "--set", fmt.Sprintf("worker.port=%d", workerPort),
			// Host networking: the ops port (probes, /metrics) must be free too.
			"--set", fmt.Sprintf("receiver.opsPort=%d", freePort(t))}
		cmd := exec.Command(goBin, append(args, extra...)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "helm template:\n%s", stderr.String())
		return out, "charts/hookinbox rendered by helm template"
	}
	require.Empty(t, extra, "testdata/pods.yaml.tmpl takes no helm arguments")
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "pods.yaml.tmpl"))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, tmpl.Execute(&out, map[string]any{
		"Image": ref, "Secret": secretName, "ReceiverPort": receiverPort, "WorkerPort": workerPort,
	}))
	return out.Bytes(), "testdata/pods.yaml.tmpl (no charts/hookinbox in the repository)"
}

// referencedVariables returns the ${NAME}s and the mounted secrets files the
// rendered ConfigMaps' files reference: the keys the operator's Secret must
// hold.
func referencedVariables(m *manifests) map[string]bool {
	// ${NAME}, and a secrets_file the chart mounts from the Secret's key.
	ref := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|/run/secrets/hookinbox/([-._A-Za-z0-9]+)`)
	names := map[string]bool{}
	for _, o := range m.objects {
		if o.Kind != "ConfigMap" {
			continue
		}
		for _, v := range o.Data {
			for _, match := range ref.FindAllStringSubmatch(v, -1) {
				names[match[1]+match[2]] = true
			}
		}
	}
	return names
}

// configFlag returns the --config path on c's command line, "" when it
// has none (the config then comes from $HOOKINBOX_CONFIG, if the spec sets
// it).
func configFlag(c *container) string {
	line := append(slices.Clone(c.Command), c.Args...)
	for i, arg := range line {
		if value, ok := strings.CutPrefix(arg, "--config="); ok {
			return value
		}
		if arg == "--config" && i+1 < len(line) {
			return line[i+1]
		}
	}
	return ""
}

// firstSource returns the name of the first source of the config file the
// rendered ConfigMaps hold.
func firstSource(t *testing.T, m *manifests) string {
	t.Helper()
	for _, o := range m.objects {
		if o.Kind != "ConfigMap" {
			continue
		}
		for _, v := range o.Data {
			var cfg struct {
				Sources []struct {
					Name string `yaml:"name"`
				} `yaml:"sources"`
			}
			if yaml.Unmarshal([]byte(v), &cfg) == nil && len(cfg.Sources) > 0 {
				return cfg.Sources[0].Name
			}
		}
	}
	t.Fatal("no ConfigMap holds a config with a source")
	return ""
}

func probeURL(t *testing.T, c *container, p *probe) string {
	t.Helper()
	port, err := c.port(p)
	require.NoError(t, err)
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, p.HTTPGet.Path)
}

// get returns the status of GET url, 0 when it got no answer.
func get(url string) int {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url) //nolint:noctx // a probe: the client's timeout bounds it
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// freePort returns a loopback TCP port that was free a moment ago: the
// containers share the host's network.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
