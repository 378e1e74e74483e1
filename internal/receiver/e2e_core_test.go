package receiver_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// stripeDelivery signs body with stripe-go's own test signer.
func stripeDelivery(t *testing.T, secret string, body []byte) http.Header {
	t.Helper()
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: body, Secret: secret, Timestamp: time.Now(), Scheme: "v1",
	})
	return http.Header{"Stripe-Signature": {signed.Header}, "Content-Type": {"application/json"}}
}

func TestEndToEndStripe(t *testing.T) {
	t.Parallel()
	const secret = "whsec_e2e_stripe"
	b := setupE2E(t, config.SourceConfig{Name: "stripe", Provider: "stripe", Secrets: []config.Secret{secret}})
	event := func(id, typ, object string) []byte {
		return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"data":{"object":{"id":%q}}}`, id, typ, object))
	}

	r := b.post(t, "stripe", stripeDelivery(t, secret, event("evt_1", "payment_intent.succeeded", "pi_1")), event("evt_1", "payment_intent.succeeded", "pi_1"))
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// A retry: Stripe re-signs with a fresh timestamp.
	r = b.post(t, "stripe", stripeDelivery(t, secret, event("evt_1", "payment_intent.succeeded", "pi_1")), event("evt_1", "payment_intent.succeeded", "pi_1"))
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// A second Event object about the same once-per-object change: a twin.
	r = b.post(t, "stripe", stripeDelivery(t, secret, event("evt_2", "payment_intent.succeeded", "pi_1")), event("evt_2", "payment_intent.succeeded", "pi_1"))
	require.Equal(t, map[string]int{"new": 0, "duplicates": 0, "twins": 1}, r.counts(t))

	// charge.refunded recurs per partial refund: never a twin.
	for _, id := range []string{"evt_3", "evt_4"} {
		r = b.post(t, "stripe", stripeDelivery(t, secret, event(id, "charge.refunded", "ch_1")), event(id, "charge.refunded", "ch_1"))
		require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	}

	// A forged delivery changes nothing.
	r = b.post(t, "stripe", stripeDelivery(t, "whsec_wrong", event("evt_5", "invoice.paid", "in_1")), event("evt_5", "invoice.paid", "in_1"))
	require.Equal(t, http.StatusUnauthorized, r.Status)

	require.Equal(t, []e2eRow{
		{EventID: "evt_1", EventType: "payment_intent.succeeded", TwinKey: "payment_intent.succeeded:pi_1", Status: "pending", HasJob: true},
		{EventID: "evt_3", EventType: "charge.refunded", Status: "pending", HasJob: true},
		{EventID: "evt_4", EventType: "charge.refunded", Status: "pending", HasJob: true},
	}, b.rows(t))
}

func TestEndToEndStripeTwinTypesCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	const secret = "whsec_e2e_stripe"
	b := setupE2E(t, config.SourceConfig{Name: "stripe", Provider: "stripe", Secrets: []config.Secret{secret}, TwinTypes: []string{}})
	for _, id := range []string{"evt_1", "evt_2"} {
		body := []byte(fmt.Sprintf(`{"id":%q,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1"}}}`, id))
		r := b.post(t, "stripe", stripeDelivery(t, secret, body), body)
		require.Equal(t, 1, r.counts(t)["new"])
	}
}

func TestEndToEndShopify(t *testing.T) {
	t.Parallel()
	const secret = "shpss_e2e"
	b := setupE2E(t, config.SourceConfig{Name: "shop", Provider: "shopify", Secrets: []config.Secret{secret}})
	body := []byte(`{"id":820982911946154508,"email":"jon@example.com"}`)
	delivery := func(webhookID, eventID, domain string) http.Header {
		return http.Header{
			"X-Shopify-Hmac-Sha256":  {sign.Shopify(secret, body)},
			"X-Shopify-Topic":        {"orders/create"},
			"X-Shopify-Shop-Domain":  {domain},
			"X-Shopify-Webhook-Id":   {webhookID},
			"X-Shopify-Event-Id":     {eventID},
			"X-Shopify-Api-Version":  {"2025-07"},
			"X-Shopify-Triggered-At": {"2026-11-29T10:00:00Z"},
		}
	}
	r := b.post(t, "shop", delivery("wh_1", "ev_1", "a.myshopify.com"), body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	r = b.post(t, "shop", delivery("wh_1", "ev_1", "a.myshopify.com"), body)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))
	// A second subscription to the topic: a new webhook id, the same event.
	r = b.post(t, "shop", delivery("wh_2", "ev_1", "a.myshopify.com"), body)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 0, "twins": 1}, r.counts(t))
	// The same event id from another shop is another event.
	r = b.post(t, "shop", delivery("wh_3", "ev_1", "b.myshopify.com"), body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	rows := b.rows(t)
	require.Len(t, rows, 2)
	require.Equal(t, "a.myshopify.com|ev_1|orders/create", rows[0].TwinKey)
	require.Equal(t, "orders/create", rows[0].EventType)
}

func TestEndToEndStandardWebhooks(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	b := setupE2E(t, config.SourceConfig{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{"whsec_cm90YXRlZC1vdXQtb2xkLXNlY3JldA==", secret}})
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	body := []byte(`{"type":"account.deposit","data":{"account_id":"acc_1","amount":"1.00"}}`)
	now := time.Now()
	sig, err := wh.Sign("msg_1", now, body)
	require.NoError(t, err)
	header := http.Header{
		"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig},
	}
	r := b.post(t, "bank", header, body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	require.Equal(t, []e2eRow{{EventID: "msg_1", EventType: "account.deposit", Status: "pending", HasJob: true}}, b.rows(t))
}

func TestEndToEndAllowIPs(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	b := setupE2E(t,
		config.SourceConfig{Name: "open", Provider: "standardwebhooks", Secrets: []config.Secret{secret}, AllowIPs: []string{"127.0.0.0/8"}},
		config.SourceConfig{Name: "closed", Provider: "standardwebhooks", Secrets: []config.Secret{secret}, AllowIPs: []string{"203.0.113.0/24"}},
	)
	body := []byte(`{"type":"t"}`)
	for source, status := range map[string]int{"open": http.StatusOK, "closed": http.StatusForbidden} {
		header, err := webhook.Headers(&webhook.Params{Provider: "standardwebhooks", Secret: secret, EventID: "msg_" + source, Time: time.Now(), Body: body})
		require.NoError(t, err)
		require.Equal(t, status, b.post(t, source, header, body).Status, source)
	}
	require.Len(t, b.rows(t), 1)
}
