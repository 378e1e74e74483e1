package provider

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"
)

// Errors of SignHeaders and Sign for a provider that carries the event id or
// type in a header (Shopify, Standard Webhooks, Svix, GitHub, an hmac source
// with hmac.id_header or hmac.type_header) when SignParams lacks it: the
// receiver would store such a delivery as failed, or with no type to route
// it by, so nothing is signed.
var (
	// ErrEventIDRequired means SignParams.EventID is empty.
	ErrEventIDRequired = errors.New("event id required")
	// ErrEventTypeRequired means SignParams.EventType is empty.
	ErrEventTypeRequired = errors.New("event type required")
)

// SignParams describe a delivery to sign as a provider would.
type SignParams struct {
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
	Config *Config
}

// Signed is a delivery as a provider sends it.
type Signed struct {
	// Header holds the request headers, Content-Type included.
	Header http.Header
	// Body is the raw body: SignParams.Body, or, for a provider that signs
	// inside the body (Adyen), that body with its signatures set.
	Body []byte
}

// headerSigners holds each provider's signing function, and bodySigners
// those of providers that sign inside the body; both are registered from
// the provider's file.
var (
	headerSigners = map[string]func(*SignParams) (http.Header, error){}
	bodySigners   = map[string]func(*SignParams) ([]byte, error){}
)

// registerSigner adds a provider's signing function for SignHeaders.
func registerSigner(name string, sign func(*SignParams) (http.Header, error)) {
	headerSigners[name] = sign
}

// registerBodySigner adds the function with which Sign rewrites the body of
// a provider that signs inside it, before its headers are signed.
func registerBodySigner(name string, sign func(*SignParams) ([]byte, error)) {
	bodySigners[name] = sign
}

// Sign returns the delivery a provider would send for params: the body,
// signed inside for a provider that signs there (Adyen, with
// SignAdyenBody), and the headers SignHeaders returns for that body. It
// serves inboxctl send, the demo and load generators, and tests.
func Sign(params *SignParams) (*Signed, error) {
	body := params.Body
	if signBody, ok := bodySigners[params.Provider]; ok {
		var err error
		if body, err = signBody(params); err != nil {
			return nil, err
		}
	}
	withBody := *params
	withBody.Body = body
	header, err := SignHeaders(&withBody)
	if err != nil {
		return nil, err
	}
	return &Signed{Header: header, Body: body}, nil
}

// SignHeaders returns the headers a provider would send with params.Body.
// For Adyen, whose signatures travel in the body, params.Body must already
// be signed (SignAdyenBody); Sign does both. It serves inboxctl send, the
// demo and load generators, and tests.
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

// requireHeaderKeys returns ErrEventIDRequired and ErrEventTypeRequired,
// after provider's name, for what a provider that carries the event id (id)
// or type (typ) in a header finds missing in p.
func (p *SignParams) requireHeaderKeys(provider string, id, typ bool) error {
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
