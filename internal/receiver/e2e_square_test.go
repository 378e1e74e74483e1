package receiver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// squareURL is the notification URL registered at Square: what the
// subscription signs, not the address the test server listens on.
const squareURL = "https://hooks.example.com/webhooks/sq"

// squareDelivery returns the headers Square sends with body, signed for url.
func squareDelivery(key, url string, body []byte, retry string) http.Header {
	header := http.Header{
		"X-Square-Hmacsha256-Signature":     {sign.Square(key, url, body)},
		"Square-Environment":                {"Production"},
		"Square-Initial-Delivery-Timestamp": {"2026-11-29T10:00:00.000000000Z"},
		"Content-Type":                      {"application/json"},
		"User-Agent":                        {"Square Connect v2"},
	}
	if retry != "" {
		header.Set("Square-Retry-Number", retry)
		header.Set("Square-Retry-Reason", "http_timeout")
	}
	return header
}

func TestEndToEndSquare(t *testing.T) {
	t.Parallel()
	const key = "Ibxx_5AKakO-3qeNVR61Dw"
	b := setupE2E(t, config.SourceConfig{Name: "sq", Provider: "square", Secrets: []config.Secret{key}, URL: squareURL})
	body := []byte(`{"merchant_id":"MLEFBHHSJGVHD","type":"payment.updated","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f",` +
		`"created_at":"2026-11-29T10:00:00Z","data":{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY",` +
		`"object":{"payment":{"id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","status":"COMPLETED","version":3}}}}`)

	r := b.post(t, "sq", squareDelivery(key, squareURL, body, ""), body)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// Square's retry carries the same event_id.
	r = b.post(t, "sq", squareDelivery(key, squareURL, body, "1"), body)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// A forged delivery, one signed for the address the receiver actually
	// listens on (the URL is never rebuilt from the request), and an empty
	// body all change nothing.
	other := []byte(`{"type":"payment.updated","event_id":"forged-1"}`)
	for _, header := range []http.Header{
		squareDelivery("wrong-key", squareURL, other, ""),
		squareDelivery(key, b.url+"/webhooks/sq", other, ""),
	} {
		require.Equal(t, http.StatusUnauthorized, b.post(t, "sq", header, other).Status)
	}
	require.Equal(t, http.StatusUnauthorized, b.post(t, "sq", squareDelivery(key, squareURL, nil, ""), nil).Status)

	require.Equal(t, []e2eRow{
		{EventID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", EventType: "payment.updated", Status: "pending", HasJob: true},
	}, b.rows(t))
}
