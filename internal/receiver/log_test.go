package receiver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func TestDeliveryLog(t *testing.T) {
	t.Parallel()

	// setupLogged serves a receiver whose log lines the test observes.
	setupLogged := func(t *testing.T, level zapcore.Level) (string, *observer.ObservedLogs) {
		t.Helper()
		core, logs := observer.New(zapcore.DebugLevel)
		url := setupWith(t, dbtest.New(t).Pool, 4*time.Second, func(c *receiver.Config) {
			c.Logger = zap.New(core)
			c.DeliveryLogLevel = level
		})
		return url, logs
	}
	// send posts a signed bank deposit with the given X-Request-Id (none
	// when empty) and returns the answer's status and X-Request-Id.
	send := func(t *testing.T, url, id, requestID string, header http.Header) (int, string) {
		t.Helper()
		body := `{"type":"account.deposit","data":{"amount":"1.00"}}`
		if header == nil {
			header = signBank(t, id, body, time.Now())
		}
		if requestID != "" {
			header.Set("X-Request-Id", requestID)
		}
		req, err := http.NewRequest(http.MethodPost, url+"/webhooks/bank", strings.NewReader(body))
		require.NoError(t, err)
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode, resp.Header.Get("X-Request-Id")
	}
	deliveryLines := func(logs *observer.ObservedLogs) []observer.LoggedEntry {
		return logs.FilterMessage("delivery").AllUntimed()
	}

	t.Run("OneLinePerDeliveryWithOutcomeCountsAndRequestID", func(t *testing.T) {
		t.Parallel()
		url, logs := setupLogged(t, zapcore.InfoLevel)

		status, first := send(t, url, "msg_1", "", nil)
		require.Equal(t, http.StatusOK, status)
		status, second := send(t, url, "msg_1", "", nil)
		require.Equal(t, http.StatusOK, status)
		require.NotEmpty(t, first)
		require.NotEqual(t, first, second, "each request gets its own id")

		lines := deliveryLines(logs)
		require.Len(t, lines, 2)
		for i, want := range []struct {
			requestID       string
			new, duplicates int64
		}{{first, 1, 0}, {second, 0, 1}} {
			line := lines[i]
			require.Equal(t, zapcore.InfoLevel, line.Level)
			fields := line.ContextMap()
			require.Equal(t, "bank", fields["source"])
			require.Equal(t, "accepted", fields["outcome"])
			require.EqualValues(t, http.StatusOK, fields["status"])
			require.Equal(t, want.new, fields["new"])
			require.Equal(t, want.duplicates, fields["duplicates"])
			require.EqualValues(t, 0, fields["twins"])
			require.Equal(t, want.requestID, fields["request_id"])
			require.Contains(t, fields, "latency")
		}
	})

	t.Run("LevelIsConfigurable", func(t *testing.T) {
		t.Parallel()
		url, logs := setupLogged(t, zapcore.DebugLevel)
		status, _ := send(t, url, "msg_1", "", nil)
		require.Equal(t, http.StatusOK, status)
		lines := deliveryLines(logs)
		require.Len(t, lines, 1)
		require.Equal(t, zapcore.DebugLevel, lines[0].Level)
	})

	t.Run("RefusalIsOneWarningWithItsReason", func(t *testing.T) {
		t.Parallel()
		url, logs := setupLogged(t, zapcore.InfoLevel)
		status, requestID := send(t, url, "", "", http.Header{"Webhook-Id": {"msg_1"}})
		require.Equal(t, http.StatusUnauthorized, status)
		lines := deliveryLines(logs)
		require.Len(t, lines, 1)
		require.Equal(t, zapcore.WarnLevel, lines[0].Level)
		fields := lines[0].ContextMap()
		require.Equal(t, "rejected", fields["outcome"])
		require.Equal(t, "signature", fields["reason"])
		require.Equal(t, requestID, fields["request_id"])
	})

	t.Run("AnIngressRequestIDIsKeptAndAHostileOneReplaced", func(t *testing.T) {
		t.Parallel()
		url, logs := setupLogged(t, zapcore.InfoLevel)
		_, kept := send(t, url, "msg_1", "ingress-7f3a.9", nil)
		require.Equal(t, "ingress-7f3a.9", kept)
		hostile := "x\" injected=" + strings.Repeat("a", 80)
		_, replaced := send(t, url, "msg_2", hostile, nil)
		require.NotEqual(t, hostile, replaced)
		require.NotEmpty(t, replaced)
		lines := deliveryLines(logs)
		require.Len(t, lines, 2)
		require.Equal(t, "ingress-7f3a.9", lines[0].ContextMap()["request_id"])
		require.Equal(t, replaced, lines[1].ContextMap()["request_id"])
	})
}
