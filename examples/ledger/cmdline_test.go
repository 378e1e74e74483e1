package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

func TestCommandLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the ledger binary")
	}
	bin, _ := buildBinaries(t)

	for _, order := range []string{"--config F migrate", "migrate --config F", "--config=F migrate", "migrate --config=F"} {
		t.Run("MigrateWithConfigBeforeOrAfter/"+order, func(t *testing.T) {
			t.Parallel()
			config := writeConfig(t, dbtest.NewEmpty(t).URL, 2*time.Second)
			code, out := proctest.Run(t, ledgerCommand(bin, nil, strings.Fields(strings.ReplaceAll(order, "F", config))...))
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "applied core 0001_")
			require.Contains(t, out, "applied ledger 0001_")
		})
	}

	t.Run("UnknownCommandIsRefused", func(t *testing.T) {
		t.Parallel()
		config := writeConfig(t, "postgres://postgres@127.0.0.1:1/postgres", 2*time.Second)
		code, out := proctest.Run(t, ledgerCommand(bin, nil, "--config", config, "migrat"))
		require.Equal(t, 1, code, out)
		require.Contains(t, out, `unknown command "migrat"`)
	})

	// The worker started on a database without the ledger's tables waits,
	// naming its own migrate command, and works once that has run.
	t.Run("WorkerWaitsForLedgerMigrate", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t) // the core set only
		config := writeConfig(t, db.URL, 2*time.Second)
		p := proctest.Start(t, ledgerCommand(bin, nil, "--config", config))
		p.WaitLine(t, "ledger is at version 0, this build needs 1); run `ledger migrate --config "+config+"`")
		require.NotContains(t, p.Log(), "inboxctl migrate")

		code, out := proctest.Run(t, ledgerCommand(bin, nil, "migrate", "--config", config))
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "applied ledger 0001_")
		p.WaitLine(t, `"msg":"worker started"`)

		p.Stop(t)
	})
}
