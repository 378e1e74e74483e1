package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// paddleSignatureHeader carries Paddle's timestamp and signatures.
const paddleSignatureHeader = "Paddle-Signature"

func init() {
	register("paddle", adapt(newPaddleVerifier), Preset{})
}

// paddleVerifier verifies Paddle Billing webhook deliveries. Paddle-Signature
// is "ts=<unix>;h1=<hex>", Stripe's layout under other names; h1 is the
// lowercase hex HMAC-SHA256 of "<ts>:<raw body>" keyed with the notification
// destination's secret key ("pdl_ntfset_…") as raw bytes. The delivery is
// authentic when any h1 matches any configured secret, so that a secret can be
// rotated; fields other than ts and h1 are ignored. Paddle's SDKs refuse a
// timestamp older than 5 seconds; here Config.Tolerance applies (5 minutes by
// default), in both directions, checked after the signature.
//
// Paddle sends one event per delivery. Its ID is the body's "event_id",
// which stays the same across retries (notification_id identifies the
// delivery to one destination), and its Type is the body's "event_type".
type paddleVerifier struct {
	keys      keyring
	tolerance time.Duration
	now       func() time.Time
}

// newPaddleVerifier returns a Paddle verifier for the destination secret keys
// in config. Config.Tolerance and Config.Now apply.
func newPaddleVerifier(config *Config) (*paddleVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	config = config.withDefaults()
	return &paddleVerifier{keys: newKeyring(sha256.New, config.Secrets), tolerance: config.Tolerance, now: config.Now}, nil
}

// Verify implements Verifier.
func (p *paddleVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	value, err := requiredHeader(header, paddleSignatureHeader)
	if err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	signature, err := paddleFields.parse(value)
	if err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	if !p.keys.matches(signature.macs, []byte(signature.timestamp), []byte(":"), body) {
		return nil, fmt.Errorf("paddle: no h1 signature matches a configured secret: %w", ErrSignatureInvalid)
	}
	if err := checkTimestamp(p.now(), signature.signedAt, p.tolerance); err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	return newDelivery(p.ParseEvent(body), header, paddleSignatureHeader), nil
}

// ParseEvent reads one Paddle event (a webhook's body, or an element of
// GET /events) as Verify does after the signature: its id and type.
// Reconciliation uses it, so that an event listed from the API is keyed
// exactly like its webhook delivery.
func (p *paddleVerifier) ParseEvent(body []byte) Event {
	payload := parsePayload(body)
	return payload.event(body, payload.str("event_id"), payload.str("event_type"), `the body's "event_id"`)
}
