package receiver_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/config"
)

// svixDelivery signs body with the Standard Webhooks Go library (Svix's
// scheme) and sends it under Svix's header names, or the webhook-* names
// Svix's libraries fall back to.
func svixDelivery(t *testing.T, secret, msgID string, body []byte, prefix string) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	now := time.Now()
	signature, err := wh.Sign(msgID, now, body)
	require.NoError(t, err)
	header := http.Header{"Content-Type": {"application/json"}}
	header.Set(prefix+"-id", msgID)
	header.Set(prefix+"-timestamp", strconv.FormatInt(now.Unix(), 10))
	header.Set(prefix+"-signature", signature)
	return header
}

func TestEndToEndSvix(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	b := setupE2E(t, config.SourceConfig{Name: "svix", Provider: "svix", Secrets: []config.Secret{secret}})
	body := []byte(`{"type":"invoice.paid","data":{"invoice_id":"inv_1","amount":"12.00"}}`)

	r := b.post(t, "svix", svixDelivery(t, secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", body, "svix"), body)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// Svix retries keep svix-id and sign afresh.
	r = b.post(t, "svix", svixDelivery(t, secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", body, "svix"), body)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// The webhook-* names are the fallback.
	r = b.post(t, "svix", svixDelivery(t, secret, "msg_2", body, "webhook"), body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	r = b.post(t, "svix", svixDelivery(t, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "msg_3", body, "svix"), body)
	require.Equal(t, http.StatusUnauthorized, r.Status)

	require.Equal(t, []e2eRow{
		{EventID: "msg_p5jXN8AQM9LWM0D4loKWxJek", EventType: "invoice.paid", Status: "pending", HasJob: true},
		{EventID: "msg_2", EventType: "invoice.paid", Status: "pending", HasJob: true},
	}, b.rows(t))
}
