package provider

import (
	"fmt"
	"net/http"
	"time"
)

// SignParams describe a delivery to sign as a provider would.
type SignParams struct {
	// Provider is the provider's config name.
	Provider string
	// Secret is the signing secret.
	Secret string
	// EventID and EventType go in the headers of schemes that carry them
	// there (Shopify, Standard Webhooks); Stripe's live in the body.
	EventID, EventType string
	// Time is the signing time of timestamped schemes.
	Time time.Time
	// Body is the raw body to sign.
	Body []byte
}

// SignHeaders returns the headers a provider would send with params.Body.
// It serves inboxctl send, the demo and load generators, and tests.
func SignHeaders(params *SignParams) (http.Header, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch params.Provider {
	case "stripe":
		h.Set("Stripe-Signature", SignStripe(params.Secret, params.Time, params.Body))
	case "shopify":
		h.Set("X-Shopify-Hmac-Sha256", SignShopify(params.Secret, params.Body))
		h.Set("X-Shopify-Webhook-Id", params.EventID)
		h.Set("X-Shopify-Topic", params.EventType)
	case "standardwebhooks":
		sig, err := SignStandardWebhooks(params.Secret, params.EventID, params.Time, params.Body)
		if err != nil {
			return nil, err
		}
		h.Set("Webhook-Id", params.EventID)
		h.Set("Webhook-Timestamp", fmt.Sprint(params.Time.Unix()))
		h.Set("Webhook-Signature", sig)
	default:
		return nil, fmt.Errorf("provider: cannot sign for %q", params.Provider)
	}
	return h, nil
}
