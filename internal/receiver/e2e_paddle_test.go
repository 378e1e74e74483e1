package receiver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// paddleDelivery returns the headers Paddle sends with body, signed at at.
func paddleDelivery(secret string, at time.Time, body []byte) http.Header {
	return http.Header{
		"Paddle-Signature": {sign.Paddle(secret, at, body)},
		"Paddle-Version":   {"1"},
		"Content-Type":     {"application/json"},
	}
}

func TestEndToEndPaddle(t *testing.T) {
	t.Parallel()
	const secret = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_e2e"
	b := setupE2E(t, config.SourceConfig{Name: "paddle", Provider: "paddle", Secrets: []config.Secret{secret}})
	body := []byte(`{"data":{"id":"txn_01hv8wptq8987qeep44cyrewp9","status":"completed"},"event_id":"evt_01hv8x2acma2gz4sx4d3yvqgzb",` +
		`"event_type":"transaction.completed","occurred_at":"2026-11-29T10:00:00.000000Z","notification_id":"ntf_01hv8x2af4cxkq2b8v2tq3hyq8"}`)

	r := b.post(t, "paddle", paddleDelivery(secret, time.Now(), body), body)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// A retry is signed afresh and keeps the event_id.
	r = b.post(t, "paddle", paddleDelivery(secret, time.Now().Add(time.Second), body), body)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// A forged delivery and a replay of a stale one change nothing.
	other := []byte(`{"event_id":"evt_forged","event_type":"transaction.completed"}`)
	require.Equal(t, http.StatusUnauthorized, b.post(t, "paddle", paddleDelivery("pdl_ntfset_wrong", time.Now(), other), other).Status)
	require.Equal(t, http.StatusUnauthorized, b.post(t, "paddle", paddleDelivery(secret, time.Now().Add(-time.Hour), other), other).Status)

	require.Equal(t, []e2eRow{
		{EventID: "evt_01hv8x2acma2gz4sx4d3yvqgzb", EventType: "transaction.completed", Status: "pending", HasJob: true},
	}, b.rows(t))
}
