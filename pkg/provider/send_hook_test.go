package provider

import (
	"net/http"
	"time"
)

// The signing side lives in internal/send, which imports this package, so
// the tests of this package cannot import it. send_test.go (package
// provider_test, linked into the same test binary) sets the functions below
// from internal/send before any test runs; they mirror its API.

// SignParams mirrors send.Params, field for field.
type SignParams struct {
	Provider, Secret   string
	EventID, EventType string
	Time               time.Time
	Body               []byte
	Config             *Config
}

// Signed mirrors send.Signed.
type Signed struct {
	Header http.Header
	Body   []byte
}

// Set from internal/send by send_test.go.
var (
	// Sign is send.Sign.
	Sign func(*SignParams) (*Signed, error)
	// SignHeaders is send.Headers.
	SignHeaders func(*SignParams) (http.Header, error)
	// SignHMAC is send.HMACHeaders.
	SignHMAC func(config *Config, secret string, t time.Time, id string, body []byte) (http.Header, error)
	// ErrEventIDRequired is send.ErrEventIDRequired.
	ErrEventIDRequired error
	// ErrEventTypeRequired is send.ErrEventTypeRequired.
	ErrEventTypeRequired error
)
