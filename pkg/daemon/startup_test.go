package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/dbtest"
)

// buildCommands compiles cmd/receiver and cmd/worker once per test run.
var buildCommands = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hookinbox-bin-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "build", "-o", dir+"/", "../../cmd/receiver", "../../cmd/worker").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
})

// runDaemon runs a daemon binary to completion and returns its exit code
// and standard error.
func runDaemon(t *testing.T, name, config string, env ...string) (int, string) {
	t.Helper()
	dir, err := buildCommands()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	cmd := exec.Command(filepath.Join(dir, name), "--config", path)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exitErr)
		return exitErr.ExitCode(), string(out)
	}
	return 0, string(out)
}

func TestDaemonsRefuseToStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemons")
	}
	const secretValue = "whsec_c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1sZWFr"

	for _, name := range []string{"receiver", "worker"} {
		t.Run(name+"/BadValueIsNamed", func(t *testing.T) {
			t.Parallel()
			code, out := runDaemon(t, name, `
database: {url: "postgres://postgres@127.0.0.1:1/postgres"}
receiver: {ack_timeout: -4s}
worker: {concurrency: -1}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["${BANK_SECRET}"]}
`, "BANK_SECRET="+secretValue)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, "receiver.ack_timeout")
			require.Contains(t, out, "worker.concurrency")
			require.NotContains(t, out, secretValue)
		})

		t.Run(name+"/UnsetSecretVariableIsNamed", func(t *testing.T) {
			t.Parallel()
			code, out := runDaemon(t, name, `
database: {url: "postgres://postgres@127.0.0.1:1/postgres"}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["${HOOKINBOX_TEST_UNSET_SECRET}"]}
`)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, "sources[0].secrets[0]")
			require.Contains(t, out, "HOOKINBOX_TEST_UNSET_SECRET")
		})

		t.Run(name+"/SchemaOlderThanNeededIsRefused", func(t *testing.T) {
			t.Parallel()
			db := dbtest.NewEmpty(t)
			code, out := runDaemon(t, name, fmt.Sprintf(`
database: {url: %q}
receiver: {listen: "127.0.0.1:0"}
worker: {listen: "127.0.0.1:0"}
sources:
  - {name: bank, provider: standardwebhooks, secrets: [%q]}
`, db.URL, secretValue))
			require.Equal(t, 1, code, out)
			require.Contains(t, out, "older than this build needs; run `inboxctl migrate`")
			require.NotContains(t, out, secretValue)
		})
	}
}
