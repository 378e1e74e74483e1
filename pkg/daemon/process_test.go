package daemon_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// daemons are the binaries the tests run, built together (one go build
// links them in parallel) once per test process.
var daemons = []string{"../../cmd/receiver", "../../cmd/worker", "../../cmd/inboxctl"}

// command returns a command running the named binary (cmd/receiver,
// cmd/worker or cmd/inboxctl, built once per test run) with an environment
// that names no config and no database: only the test's config does.
func command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	i := slices.Index(daemons, "../../cmd/"+name)
	require.GreaterOrEqual(t, i, 0, "no such daemon: %s", name)
	cmd := exec.Command(proctest.Build(t, daemons...)[i], args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=", "HOOKINBOX_DATABASE_URL=")
	return cmd
}

// run runs a binary to completion and returns its exit code and its
// standard output and error together.
func run(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	return proctest.Run(t, command(t, name, args...))
}

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	return path
}

// start runs the named binary with args in the background until the test
// ends.
func start(t *testing.T, name string, args ...string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, command(t, name, args...))
}

// listenAddr is the address a daemon (what: receiver or worker) logged it
// listens on.
func listenAddr(t *testing.T, p *proctest.Process, what string) string {
	t.Helper()
	m := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(p.WaitLine(t, what+" listening"))
	require.NotNil(t, m)
	return m[1]
}

// get returns the status code of GET url.
func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
