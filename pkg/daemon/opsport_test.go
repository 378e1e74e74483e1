package daemon_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// getBody returns the status code and body of GET url.
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestReceiverOpsListen runs the receiver binary with and without
// receiver.ops_listen and checks, over real HTTP, which port serves what.
func TestReceiverOpsListen(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemons")
	}

	t.Run("MetricsMoveToTheOpsPort", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		config := strings.Replace(daemonConfig(db.URL), `receiver: {listen: "127.0.0.1:0"}`,
			`receiver: {listen: "127.0.0.1:0", ops_listen: "127.0.0.1:0"}`, 1)
		p := start(t, "receiver", "--config", writeConfig(t, config))
		web := "http://" + listenAddr(t, p, "receiver")
		ops := "http://" + listenAddr(t, p, "receiver ops")
		require.NotEqual(t, web, ops)
		p.WaitLine(t, "receiver accepting webhooks")

		require.Equal(t, http.StatusOK, postWebhook(t, strings.TrimPrefix(web, "http://"), "msg_1"))
		code, _ := getBody(t, web+"/metrics")
		require.Equal(t, http.StatusNotFound, code, "the webhook port no longer serves /metrics")
		code, body := getBody(t, ops+"/metrics")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `hookinbox_receiver_deliveries_total{outcome="accepted"`, "the ops port serves the receiver's metrics")
		for _, path := range []string{"/healthz", "/readyz"} {
			require.Equal(t, http.StatusOK, get(t, ops+path), "probes on the ops port: %s", path)
			require.Equal(t, http.StatusOK, get(t, web+path), "and still on the webhook port, for load balancers: %s", path)
		}
		require.Equal(t, http.StatusNotFound, postWebhook(t, strings.TrimPrefix(ops, "http://"), "msg_2"), "no webhook on the ops port")

		require.Equal(t, 0, p.Terminate(t), p.Log())
	})

	t.Run("WithoutItOnePortServesAll", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		p := start(t, "receiver", "--config", writeConfig(t, daemonConfig(db.URL)))
		web := "http://" + listenAddr(t, p, "receiver")
		p.WaitLine(t, "receiver accepting webhooks")
		code, body := getBody(t, web+"/metrics")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "hookinbox_backlog_up")
		require.NotContains(t, p.Log(), "receiver ops listening")
		require.Equal(t, 0, p.Terminate(t), p.Log())
	})
}
