package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
)

// squareSignatureHeader carries Square's HMAC-SHA256 signature.
const squareSignatureHeader = "X-Square-Hmacsha256-Signature"

// squareAuditHeaders are the headers a Square delivery keeps: the signature
// and what tells a retry from a first attempt.
var squareAuditHeaders = []string{
	squareSignatureHeader,
	"Square-Environment",
	"Square-Initial-Delivery-Timestamp",
	"Square-Retry-Number",
	"Square-Retry-Reason",
}

func init() {
	register("square", adapt(newSquareVerifier), Preset{})
}

// squareVerifier verifies Square webhook deliveries.
// x-square-hmacsha256-signature is the standard base64 of HMAC-SHA256 over
// the subscription's notification URL followed by the raw body, keyed with
// the subscription's signature key as raw bytes. The URL is Config.URL,
// exactly as registered at Square: it is never rebuilt from the request,
// which behind a proxy or ingress would differ in scheme, host or path.
// The legacy SHA-1 x-square-signature is not accepted. Nothing signed
// carries a time, so there is no timestamp tolerance.
//
// An empty body is refused even when its signature matches: Square never
// sends one, and square-go-sdk's VerifySignature accepts an empty body
// without checking anything, a hole not to copy. Only the canonical base64
// spelling of a signature is accepted (see Shopify).
//
// Square sends one event per delivery. Its ID is the body's "event_id",
// which Square keeps across retries, and its Type is the body's "type".
type squareVerifier struct {
	keys keyring
	url  []byte
}

// newSquareVerifier returns a Square verifier for the subscription signature
// keys in config (Secrets) and the notification URL (URL, required).
// Config.Tolerance and Config.Now are not used.
func newSquareVerifier(config *Config) (*squareVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("square: %w", err)
	}
	if config.URL == "" {
		return nil, errors.New("square: url is required: the notification URL exactly as registered at Square")
	}
	return &squareVerifier{keys: newKeyring(sha256.New, config.Secrets), url: []byte(config.URL)}, nil
}

// Verify implements Verifier.
func (s *squareVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	signature, err := requiredHeader(header, squareSignatureHeader)
	if err != nil {
		return nil, fmt.Errorf("square: %w", err)
	}
	if len(body) == 0 {
		return nil, fmt.Errorf("square: body is empty: %w", ErrSignatureInvalid)
	}
	if mac, ok := decodeBase64MAC(signature, sha256.Size); !ok || !s.keys.matches([][]byte{mac}, s.url, body) {
		return nil, fmt.Errorf("square: %s matches no configured key for the configured url: %w",
			squareSignatureHeader, ErrSignatureInvalid)
	}
	return newDelivery(s.ParseEvent(body), header, squareAuditHeaders...), nil
}

// ParseEvent reads one Square event (a webhook's body, or an element of
// SearchEvents' events) as Verify does after the signature: its id and
// type. Reconciliation uses it, so that an event listed from the API is
// keyed exactly like its webhook delivery.
func (s *squareVerifier) ParseEvent(body []byte) Event {
	p := parsePayload(body)
	return p.event(body, p.str("event_id"), p.str("type"), `the body's "event_id"`)
}
