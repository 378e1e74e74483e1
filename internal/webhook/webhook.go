// Package webhook builds and sends webhook deliveries signed as a provider
// signs them, from a source's provider.Config: the headers (Headers), the
// body of a provider that signs inside it (Sign), and the POST itself
// (Deliver). It serves inboxctl send, the demo, load generators, the fault
// suite and tests; the signatures themselves come from internal/sign.
package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/hookinbox/hookinbox/pkg/provider"
)

// Errors of Headers and Sign for a provider that carries the event id or
// type in a header (Shopify, Standard Webhooks, Svix, GitHub, an hmac source
// with hmac.id_header or hmac.type_header) when Params lacks it: the
// receiver would store such a delivery as failed, or with no type to route
// it by, so nothing is signed.
var (
	// ErrEventIDRequired means Params.EventID is empty.
	ErrEventIDRequired = errors.New("event id required")
	// ErrEventTypeRequired means Params.EventType is empty.
	ErrEventTypeRequired = errors.New("event type required")
)

// Params describe a delivery to sign as a provider would.
type Params struct {
	// Provider is the provider's config name.
	Provider string
	// Secret is the signing secret.
	Secret string
	// EventID and EventType go in the headers of schemes that carry them
	// there (Shopify, Standard Webhooks, Svix, GitHub, hmac with
	// hmac.id_header or hmac.type_header), which then require them
	// (ErrEventIDRequired, ErrEventTypeRequired). Twilio sends EventID, when
	// set, as I-Twilio-Idempotency-Token. Others read both from Body.
	EventID, EventType string
	// Time is the signing time of timestamped schemes.
	Time time.Time
	// Body is the raw body to sign.
	Body []byte
	// Config is the receiving source's verifier config, for schemes that
	// sign more than a secret: Basic Auth credentials, the notification URL,
	// the algorithm, the hmac provider's settings. May be nil.
	Config *provider.Config
}

// Signed is a delivery as a provider sends it.
type Signed struct {
	// Header holds the request headers, Content-Type included.
	Header http.Header
	// Body is the raw body: Params.Body, or, for a provider that signs
	// inside the body (Adyen), that body with its signatures set.
	Body []byte
}

// Sign returns the delivery a provider would send for params: the body,
// signed inside for a provider that signs there (Adyen, with
// sign.AdyenBody), and the headers Headers returns for that body.
func Sign(params *Params) (*Signed, error) {
	body := params.Body
	if signBody, ok := bodySigners[params.Provider]; ok {
		var err error
		if body, err = signBody(params); err != nil {
			return nil, err
		}
	}
	withBody := *params
	withBody.Body = body
	header, err := Headers(&withBody)
	if err != nil {
		return nil, err
	}
	return &Signed{Header: header, Body: body}, nil
}

// Headers returns the headers a provider would send with params.Body. For
// Adyen, whose signatures travel in the body, params.Body must already be
// signed (sign.AdyenBody); Sign does both.
func Headers(params *Params) (http.Header, error) {
	signHeaders, ok := headerSigners[params.Provider]
	if !ok {
		names := make([]string, 0, len(headerSigners))
		for n := range headerSigners {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("provider: cannot sign for %q (can sign: %v)", params.Provider, names)
	}
	h, err := signHeaders(params)
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
func signingURL(provider string, p *Params) (string, error) {
	if p.Config == nil || p.Config.URL == "" {
		return "", fmt.Errorf("%s: signing needs the source's url (Params.Config.URL)", provider)
	}
	return p.Config.URL, nil
}

// requireHeaderKeys returns ErrEventIDRequired and ErrEventTypeRequired,
// after provider's name, for what a provider that carries the event id (id)
// or type (typ) in a header finds missing in p.
func (p *Params) requireHeaderKeys(provider string, id, typ bool) error {
	missingID, missingType := id && p.EventID == "", typ && p.EventType == ""
	switch {
	case missingID && missingType:
		return fmt.Errorf("%s sends the event id and type in headers: %w, %w", provider, ErrEventIDRequired, ErrEventTypeRequired)
	case missingID:
		return fmt.Errorf("%s sends the event id in a header: %w", provider, ErrEventIDRequired)
	case missingType:
		return fmt.Errorf("%s sends the event type in a header: %w", provider, ErrEventTypeRequired)
	}
	return nil
}

// setBasicAuth sets header's Authorization to cred.
func setBasicAuth(header http.Header, cred provider.BasicAuth) {
	req := http.Request{Header: header}
	req.SetBasicAuth(cred.Username, cred.Password)
}

// basicAuthHeader returns a header carrying the first Basic Auth pair of
// config, for the signers of providers that require Basic Auth.
func basicAuthHeader(provider string, config *provider.Config) (http.Header, error) {
	if config == nil || len(config.BasicAuth) == 0 {
		return nil, fmt.Errorf("%s: signing needs Params.Config.BasicAuth", provider)
	}
	header := http.Header{}
	setBasicAuth(header, config.BasicAuth[0])
	return header, nil
}
