package provider

import (
	"fmt"
	"net/http"
	"sort"
	"time"
)

// SignParams describe a delivery to sign as a provider would.
type SignParams struct {
	// Provider is the provider's config name.
	Provider string
	// Secret is the signing secret.
	Secret string
	// EventID and EventType go in the headers of schemes that carry them
	// there (Shopify, Standard Webhooks, GitHub); others read them from Body.
	EventID, EventType string
	// Time is the signing time of timestamped schemes.
	Time time.Time
	// Body is the raw body to sign.
	Body []byte
	// Config is the receiving source's verifier config, for schemes that
	// sign more than a secret: Basic Auth credentials, the notification URL,
	// the algorithm, the hmac provider's settings. May be nil.
	Config *Config
}

// headerSigners holds each provider's signing function, registered from the
// provider's file.
var headerSigners = map[string]func(*SignParams) (http.Header, error){}

// registerSigner adds a provider's signing function for SignHeaders.
func registerSigner(name string, sign func(*SignParams) (http.Header, error)) {
	headerSigners[name] = sign
}

// SignHeaders returns the headers a provider would send with params.Body.
// It serves inboxctl send, the demo and load generators, and tests.
func SignHeaders(params *SignParams) (http.Header, error) {
	sign, ok := headerSigners[params.Provider]
	if !ok {
		names := make([]string, 0, len(headerSigners))
		for n := range headerSigners {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("provider: cannot sign for %q (can sign: %v)", params.Provider, names)
	}
	h, err := sign(params)
	if err != nil {
		return nil, err
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return h, nil
}

// signingURL returns the URL a provider signs with the body (Square,
// Twilio), which signing takes from the receiving source's config.
func signingURL(provider string, p *SignParams) (string, error) {
	if p.Config == nil || p.Config.URL == "" {
		return "", fmt.Errorf("%s: signing needs the source's url (SignParams.Config.URL)", provider)
	}
	return p.Config.URL, nil
}
