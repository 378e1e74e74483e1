package faults_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// TestDoctor checks what an operator is told a 2xx survives (issue 39):
// by `inboxctl doctor`, by a daemon's line at start and by its
// hookinbox_ack_survives metric, on a primary with a synchronous standby
// streaming (scenario 13's clusters), as a role that may not read
// pg_stat_replication, and on the standby once promoted, which has no
// standby of its own. There database.durability.require: server_loss makes
// the doctor fail and keeps a receiver from starting.
func TestDoctor(t *testing.T) {
	t.Parallel()
	primary, standby, _ := newReplicated(t, true, func(dbURL string) {
		migrate(t, dbURL)
		runSQL(t, dbURL, `CREATE ROLE watcher LOGIN`)
	})
	doctor := func(t *testing.T, dbURL, database string) (int, string) {
		t.Helper()
		return proctest.Run(t, command(inboxctlBin(t), "doctor", "--config", setup{DB: dbURL, Database: database}.write(t)))
	}
	requireLoss := "durability: {require: server_loss}"
	withStandby := primary.dbURL(t, "faults")

	code, out := doctor(t, withStandby, requireLoss)
	t.Logf("inboxctl doctor, synchronous standby streaming:\n%s", out)
	require.Zero(t, code, out)
	require.Contains(t, out, `synchronous standby  "*", 1 streaming`)
	require.Contains(t, out, "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: yes\n")

	code, out = doctor(t, strings.Replace(withStandby, "postgres@", "watcher@", 1), "")
	t.Logf("inboxctl doctor, as a role without pg_monitor:\n%s", out)
	require.Zero(t, code, out)
	require.Contains(t, out, `synchronous standby  "*", streaming unknown (reading pg_stat_replication needs pg_monitor)`)

	receiver, target := startReceiver(t, setup{DB: withStandby}.write(t))
	receiver.WaitLine(t, "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: yes")
	code, page := getPage(t, strings.Replace(target, "/webhooks/bank", "/metrics", 1))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `hookinbox_ack_survives{failure="server_loss"} 1`)

	standby.promote(t)
	alone := standby.dbURL(t, "faults")
	code, out = doctor(t, alone, requireLoss)
	t.Logf("inboxctl doctor, no synchronous standby:\n%s", out)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "synchronous standby  none")
	require.Contains(t, out, "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: no (no synchronous standby)\n")
	require.Contains(t, out, "database.durability.require (server_loss): a 2xx would not survive the loss of this server: no synchronous standby")

	refused := proctest.Start(t, command(receiverBin(t), "--config", setup{DB: alone, Database: requireLoss}.write(t)))
	addr := listenAddr(t, refused, "receiver")
	refused.WaitLine(t, "waiting for the durability database.durability.require asks for", "no synchronous standby")
	code, _ = getPage(t, "http://"+addr+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "a receiver short of the durability it requires is not ready")
	require.NotContains(t, refused.Log(), "receiver accepting webhooks")
}
