package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// stripeSignatureHeader carries Stripe's timestamp and signatures.
const stripeSignatureHeader = "Stripe-Signature"

func init() {
	register("stripe", adapt(newStripeVerifier), Preset{})
}

// stripeVerifier verifies Stripe webhook deliveries. The Stripe-Signature
// header is "t=<unix>,v1=<hex>[,v1=<hex>…][,v0=<hex>]"; each v1 is the
// lowercase hex HMAC-SHA256 of "<t>.<raw body>" keyed with the endpoint
// secret's bytes as they are (the whsec_ prefix is part of the key, nothing is
// decoded). The delivery is authentic when any v1 matches any configured
// secret: while a secret is being rolled Stripe sends one v1 per active secret.
// v0 (a fake signature on test events) and unknown schemes are ignored.
//
// Stripe sends one event per delivery; its ID and Type are the body's "id"
// and "type".
//
// It is stricter than stripe-go's webhook.ValidatePayload on purpose: a
// timestamp too far in the future is refused like a stale one (stripe-go
// only refuses old ones), t must appear exactly once in canonical form, and
// v1 values must be 64 lowercase hex digits (others are skipped), so that one
// signature has exactly one accepted spelling.
type stripeVerifier struct {
	keys      keyring
	tolerance time.Duration
	now       func() time.Time
	twinTypes map[string]bool
}

// DefaultStripeTwinTypes are the event types that happen once per object,
// for which a second Event object about the same object is a twin: the
// inbox then stores one of them. A type that can recur for one object must
// never be listed: charge.refunded fires for every partial refund of a
// charge, and treating the second refund as a twin would lose money.
var DefaultStripeTwinTypes = []string{
	"payment_intent.succeeded",
	"charge.succeeded",
	"invoice.paid",
	"invoice.payment_succeeded",
	"checkout.session.completed",
	"checkout.session.async_payment_succeeded",
	"customer.created",
	"customer.subscription.created",
	"charge.dispute.created",
	"payout.paid",
}

// newStripeVerifier returns a Stripe verifier for the endpoint secrets in
// config ("whsec_…"). Config.Tolerance and Config.Now apply.
func newStripeVerifier(config *Config) (*stripeVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	config = config.withDefaults()
	twinTypes := config.TwinTypes
	if twinTypes == nil {
		twinTypes = DefaultStripeTwinTypes
	}
	s := &stripeVerifier{
		keys: newKeyring(sha256.New, config.Secrets), tolerance: config.Tolerance, now: config.Now,
		twinTypes: map[string]bool{},
	}
	for _, t := range twinTypes {
		s.twinTypes[t] = true
	}
	return s, nil
}

// Verify implements Verifier.
func (s *stripeVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	value, err := requiredHeader(header, stripeSignatureHeader)
	if err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	signature, err := stripeFields.parse(value)
	if err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	if !s.keys.matches(signature.macs, []byte(signature.timestamp), []byte("."), body) {
		return nil, fmt.Errorf("stripe: no v1 signature matches a configured secret: %w", ErrSignatureInvalid)
	}
	if err := checkTimestamp(s.now(), signature.signedAt, s.tolerance); err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	return newDelivery(s.ParseEvent(body), header, stripeSignatureHeader), nil
}

// ParseEvent reads one Stripe Event object (a webhook's body, or an element
// of GET /v1/events) as Verify does after the signature: its id, type,
// payload and twin key. Reconciliation uses it, so that an event listed
// from the API is keyed exactly like its webhook delivery.
func (s *stripeVerifier) ParseEvent(body []byte) Event {
	p := parsePayload(body)
	event := p.event(body, p.str("id"), p.str("type"), `the body's "id"`)
	if event.ParseError == nil && s.twinTypes[event.Type] {
		if objectID := p.path("data", "object", "id"); objectID != "" {
			event.TwinKey = storableKey(event.Type + ":" + objectID)
		}
	}
	return event
}

// stripeScheme names the fields of a Stripe-style signature header, a
// signed timestamp and one or more hex HMAC-SHA256 signatures, which Paddle
// copies under other names.
type stripeScheme struct {
	separator    string // between fields
	timestampKey string // the signed unix timestamp
	macKey       string // each signature of the accepted scheme version
}

var (
	// stripeFields is "t=<unix>,v1=<hex>[,v1=<hex>…][,v0=<hex>]".
	stripeFields = stripeScheme{separator: ",", timestampKey: "t", macKey: "v1"}
	// paddleFields is "ts=<unix>;h1=<hex>[;h1=<hex>…]".
	paddleFields = stripeScheme{separator: ";", timestampKey: "ts", macKey: "h1"}
)

// stripeSignature is a parsed Stripe-style signature header.
type stripeSignature struct {
	timestamp string    // as sent, which is what was signed
	signedAt  time.Time // as an instant
	macs      [][]byte  // the decoded signatures
}

// parse parses a signature header. Like stripe-go, it refuses a field that
// is not one key=value pair and ignores other keys (other scheme versions).
// It also refuses a second timestamp, and skips signatures that are not 64
// lowercase hex digits, the only form either provider sends.
func (scheme stripeScheme) parse(value string) (*stripeSignature, error) {
	signature := &stripeSignature{}
	for field := range strings.SplitSeq(value, scheme.separator) {
		key, val, ok := strings.Cut(field, "=")
		if !ok || strings.Contains(val, "=") {
			return nil, fmt.Errorf("header field is not key=value: %w", ErrSignatureInvalid)
		}
		switch key {
		case scheme.timestampKey:
			if signature.timestamp != "" {
				return nil, fmt.Errorf("header has more than one %s: %w", scheme.timestampKey, ErrSignatureInvalid)
			}
			signedAt, err := parseUnix(val)
			if err != nil {
				return nil, err
			}
			signature.timestamp, signature.signedAt = val, signedAt
		case scheme.macKey:
			if mac, ok := decodeHexMAC(val, sha256.Size); ok {
				signature.macs = append(signature.macs, mac)
			}
		}
	}
	if signature.timestamp == "" {
		return nil, fmt.Errorf("header has no %s: %w", scheme.timestampKey, ErrSignatureInvalid)
	}
	if len(signature.macs) == 0 {
		return nil, fmt.Errorf("header has no well-formed %s signature (other versions are ignored): %w",
			scheme.macKey, ErrSignatureInvalid)
	}
	return signature, nil
}
