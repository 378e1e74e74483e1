package provider

import (
	"net/http"
	"time"
)

// The signing side lives in internal/webhook, which imports this package, so
// the tests of this package cannot import it. webhook_test.go (package
// provider_test, linked into the same test binary) sets the functions below
// from internal/webhook before any test runs; they mirror its API.

// SignParams mirrors webhook.Params, field for field.
type SignParams struct {
	Provider, Secret   string
	EventID, EventType string
	Time               time.Time
	Body               []byte
	Config             *Config
}

// Signed mirrors webhook.Signed.
type Signed struct {
	Header http.Header
	Body   []byte
}

// Set from internal/webhook by webhook_test.go.
var (
	// Sign is webhook.Sign.
	Sign func(*SignParams) (*Signed, error)
	// SignHeaders is webhook.Headers.
	SignHeaders func(*SignParams) (http.Header, error)
	// SignHMAC is webhook.HMACHeaders.
	SignHMAC func(config *Config, secret string, t time.Time, id string, body []byte) (http.Header, error)
	// ErrEventIDRequired is webhook.ErrEventIDRequired.
	ErrEventIDRequired error
	// ErrEventTypeRequired is webhook.ErrEventTypeRequired.
	ErrEventTypeRequired error
)

// SetSignErrors sets ErrEventIDRequired and ErrEventTypeRequired.
func SetSignErrors(idRequired, typeRequired error) {
	ErrEventIDRequired, ErrEventTypeRequired = idRequired, typeRequired
}
