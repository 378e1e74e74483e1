package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/dbtest"
)

// runLedger runs the ledger binary to completion with args and returns its
// exit code and output.
func runLedger(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exitErr)
		return exitErr.ExitCode(), string(out)
	}
	return 0, string(out)
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the ledger binary")
	}
	bin, err := buildLedger()
	require.NoError(t, err)

	for _, order := range []string{"--config F migrate", "migrate --config F", "--config=F migrate", "migrate --config=F"} {
		t.Run("MigrateWithConfigBeforeOrAfter/"+order, func(t *testing.T) {
			t.Parallel()
			config := writeConfig(t, dbtest.NewEmpty(t).URL, 2*time.Second)
			code, out := runLedger(t, bin, strings.Fields(strings.ReplaceAll(order, "F", config))...)
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "applied core 0001_")
			require.Contains(t, out, "applied ledger 0001_")
		})
	}

	t.Run("UnknownCommandIsRefused", func(t *testing.T) {
		t.Parallel()
		config := writeConfig(t, "postgres://postgres@127.0.0.1:1/postgres", 2*time.Second)
		code, out := runLedger(t, bin, "--config", config, "migrat")
		require.Equal(t, 1, code, out)
		require.Contains(t, out, `unknown command "migrat"`)
	})

	// The worker started on a database without the ledger's tables waits,
	// naming its own migrate command, and works once that has run.
	t.Run("WorkerWaitsForLedgerMigrate", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t) // the core set only
		config := writeConfig(t, db.URL, 2*time.Second)
		logs := &syncBuffer{}
		p := startLedger(t, bin, config, logs)
		p.waitUntil(t, time.Minute, logs, func() bool {
			return strings.Contains(logs.String(),
				"ledger is at version 0, this build needs 1); run `ledger migrate --config "+config+"`")
		})
		require.NotContains(t, logs.String(), "inboxctl migrate")

		code, out := runLedger(t, bin, "migrate", "--config", config)
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "applied ledger 0001_")
		p.waitUntil(t, time.Minute, logs, func() bool { return strings.Contains(logs.String(), `"msg":"worker started"`) })

		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		<-p.exited
		require.NoError(t, p.err, "logs:\n%s", logs)
	})
}
