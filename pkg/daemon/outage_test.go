package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/pgproxy"
)

// TestReceiverStaysReadyWithoutTheDatabase starts the real receiver, with
// the chart's ops port, on a database it then loses (a proxy in front of
// PostgreSQL, cut: every connection closed, every new one turned away, as
// in a failover). The receiver must stay ready, so that Kubernetes keeps
// it in its Service, answer deliveries 503 with Retry-After, which
// providers retry, and store them again once the database is back, without
// a restart.
func TestReceiverStaysReadyWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemons")
	}
	db := dbtest.New(t)
	proxy, proxyURL := pgproxy.New(t, db.URL)
	proxy.Open()
	config := strings.Replace(daemonConfig(proxyURL), `receiver: {listen: "127.0.0.1:0"}`,
		`receiver: {listen: "127.0.0.1:0", ops_listen: "127.0.0.1:0"}`, 1)
	p := start(t, "receiver", "--config", writeConfig(t, config))
	addr, ops := listenAddr(t, p, "receiver"), listenAddr(t, p, "receiver ops")
	p.WaitLine(t, "receiver accepting webhooks")
	require.Equal(t, http.StatusOK, postWebhook(t, addr, "msg_before"))

	proxy.Cut()
	code, retryAfter := postWebhookRetryAfter(t, addr, "msg_during")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "5", retryAfter, "receiver.retry_after's default")
	p.WaitLine(t, `"reason":"db_unavailable"`)
	// Probed after the refusal, while the database is still away.
	require.Equal(t, http.StatusOK, get(t, "http://"+ops+"/readyz"))
	require.Equal(t, http.StatusOK, get(t, "http://"+ops+"/healthz"))
	code, retryAfter = postWebhookRetryAfter(t, addr, "msg_during")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "5", retryAfter)
	require.Equal(t, http.StatusOK, get(t, "http://"+ops+"/readyz"))

	proxy.Open()
	back := time.Now()
	for postWebhook(t, addr, "msg_during") != http.StatusOK {
		require.Less(t, time.Since(back), 30*time.Second, "the receiver did not store deliveries again")
		<-time.After(20 * time.Millisecond)
	}
	t.Logf("stored again %s after the database came back", time.Since(back).Round(time.Millisecond))
	var rows int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_inbox`).Scan(&rows))
	require.Equal(t, 2, rows)
	require.Equal(t, 0, p.Terminate(t), p.Log())
}
