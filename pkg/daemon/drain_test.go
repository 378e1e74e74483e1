package daemon_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestReceiverDrainsOnSIGTERM runs the receiver binary and stops it the way
// Kubernetes does: after SIGTERM it answers /readyz with 503 (so that the
// endpoints drop it) while it still serves webhooks, for
// receiver.shutdown_delay, and then exits cleanly.
func TestReceiverDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemons")
	}

	// Long enough for the checks below on a loaded machine: the process
	// waits it out whatever the test does, so it only costs its length.
	const delay = 10 * time.Second
	db := dbtest.New(t)
	config := fmt.Sprintf(`
database: {url: %q}
receiver: {listen: "127.0.0.1:0", shutdown_delay: %s}
worker: {routes: [{source: bank, handlers: [noop]}]}
sources:
  - {name: bank, provider: standardwebhooks, secrets: [%q]}
`, db.URL, delay, secretValue)
	p := start(t, "receiver", "--config", writeConfig(t, config))
	addr := listenAddr(t, p, "receiver")
	p.WaitLine(t, "receiver accepting webhooks")
	require.Equal(t, http.StatusOK, get(t, "http://"+addr+"/readyz"))
	require.Equal(t, http.StatusOK, postWebhook(t, addr, "msg_before"))

	signalled := time.Now()
	require.NoError(t, syscall.Kill(p.PID(), syscall.SIGTERM))
	p.WaitLine(t, "receiver unready", `"shutdown_delay":10`)

	// Unready, yet serving: each answer closes its connection, so a proxy
	// holding one open moves to another pod.
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.True(t, resp.Close, "the answer during the delay closes its connection")
	require.Equal(t, http.StatusOK, get(t, "http://"+addr+"/healthz"))
	require.Equal(t, http.StatusOK, postWebhook(t, addr, "msg_during"))
	// Had the delay ended before the requests above, the process would have
	// logged it first.
	require.NotContains(t, p.Log(), "receiver draining", "the delay ended before the checks: they proved nothing")

	require.Equal(t, 0, p.Wait(t), p.Log())
	p.WaitLine(t, "receiver draining")
	p.WaitLine(t, "receiver stopped")
	require.GreaterOrEqual(t, time.Since(signalled), delay, "the receiver exited before its shutdown delay")

	var stored int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_inbox WHERE event_id IN ('msg_before', 'msg_during')`).Scan(&stored))
	require.Equal(t, 2, stored, "the delivery answered during the delay was committed")
}
