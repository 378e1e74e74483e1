package provider

import (
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stripeSignatureHeader carries Stripe's timestamp and signatures.
const stripeSignatureHeader = "Stripe-Signature"

func init() {
	register("stripe", adapt(NewStripe), Preset{})
	registerSigner("stripe", func(p *SignParams) (http.Header, error) {
		return http.Header{"Stripe-Signature": {SignStripe(p.Secret, p.Time, p.Body)}}, nil
	})
}

// Stripe verifies Stripe webhook deliveries. The Stripe-Signature header is
// "t=<unix>,v1=<hex>[,v1=<hex>…][,v0=<hex>]"; each v1 is the lowercase hex
// HMAC-SHA256 of "<t>.<raw body>" keyed with the endpoint secret's bytes as
// they are (the whsec_ prefix is part of the key, nothing is decoded). The
// delivery is authentic when any v1 matches any configured secret: while a
// secret is being rolled Stripe sends one v1 per active secret. v0 (a fake
// signature on test events) and unknown schemes are ignored.
//
// Stripe sends one event per delivery; its ID and Type are the body's "id"
// and "type".
//
// It is stricter than stripe-go's webhook.ValidatePayload on purpose: a
// timestamp too far in the future is refused like a stale one (stripe-go
// only refuses old ones), t must appear exactly once in canonical form, and
// v1 values must be 64 lowercase hex digits (others are skipped), so that one
// signature has exactly one accepted spelling.
type Stripe struct {
	secrets   [][]byte
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

// NewStripe returns a Stripe verifier for the endpoint secrets in config
// ("whsec_…"). Config.Tolerance and Config.Now apply.
func NewStripe(config *Config) (*Stripe, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	config = config.withDefaults()
	secrets := make([][]byte, len(config.Secrets))
	for i, secret := range config.Secrets {
		secrets[i] = []byte(secret)
	}
	twinTypes := config.TwinTypes
	if twinTypes == nil {
		twinTypes = DefaultStripeTwinTypes
	}
	s := &Stripe{secrets: secrets, tolerance: config.Tolerance, now: config.Now, twinTypes: map[string]bool{}}
	for _, t := range twinTypes {
		s.twinTypes[t] = true
	}
	return s, nil
}

// Verify implements Verifier.
func (s *Stripe) Verify(body []byte, header http.Header) (*Delivery, error) {
	value := header.Get(stripeSignatureHeader)
	if value == "" {
		return nil, fmt.Errorf("stripe: no %s header: %w", stripeSignatureHeader, ErrSignatureMissing)
	}
	signature, err := parseStripeSignature(value)
	if err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	if !s.matches(signature, body) {
		return nil, fmt.Errorf("stripe: no v1 signature matches a configured secret: %w", ErrSignatureInvalid)
	}
	if err := checkTimestamp(s.now(), signature.signedAt, s.tolerance); err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	p := parsePayload(body)
	event := p.event(body, p.str("id"), p.str("type"), `the body's "id"`)
	if event.ParseError == nil && s.twinTypes[event.Type] {
		if objectID := p.path("data", "object", "id"); objectID != "" {
			event.TwinKey = event.Type + ":" + objectID
		}
	}
	return newDelivery(event, header, stripeSignatureHeader), nil
}

// matches reports whether any v1 signature is the HMAC of the delivery under
// any secret.
func (s *Stripe) matches(signature *stripeSignature, body []byte) bool {
	for _, secret := range s.secrets {
		expected := hmacSHA256(secret, []byte(signature.timestamp), []byte("."), body)
		for _, v1 := range signature.v1 {
			if hmac.Equal(expected, v1) {
				return true
			}
		}
	}
	return false
}

// stripeSignature is a parsed Stripe-Signature header.
type stripeSignature struct {
	timestamp string    // t as sent, which is what was signed
	signedAt  time.Time // t as an instant
	v1        [][]byte  // the decoded v1 signatures
}

// parseStripeSignature parses "t=…,v1=…,…". Like stripe-go, it refuses a
// field that is not one key=value pair and ignores schemes other than v1.
func parseStripeSignature(value string) (*stripeSignature, error) {
	signature := &stripeSignature{}
	for field := range strings.SplitSeq(value, ",") {
		key, val, ok := strings.Cut(field, "=")
		if !ok || strings.Contains(val, "=") {
			return nil, fmt.Errorf("header field is not key=value: %w", ErrSignatureInvalid)
		}
		switch key {
		case "t":
			if signature.timestamp != "" {
				return nil, fmt.Errorf("header has more than one t: %w", ErrSignatureInvalid)
			}
			signedAt, err := parseUnix(val)
			if err != nil {
				return nil, err
			}
			signature.timestamp, signature.signedAt = val, signedAt
		case "v1":
			if mac, ok := decodeLowerHexSHA256(val); ok {
				signature.v1 = append(signature.v1, mac)
			}
		}
	}
	if signature.timestamp == "" {
		return nil, fmt.Errorf("header has no t: %w", ErrSignatureInvalid)
	}
	if len(signature.v1) == 0 {
		return nil, fmt.Errorf("header has no well-formed v1 signature (v0 and other schemes are ignored): %w",
			ErrSignatureInvalid)
	}
	return signature, nil
}

// decodeLowerHexSHA256 decodes a SHA-256 MAC written as 64 lowercase hex
// digits, the only form Stripe sends.
func decodeLowerHexSHA256(s string) ([]byte, bool) {
	if len(s) != 64 || strings.ContainsFunc(s, func(r rune) bool {
		return (r < '0' || r > '9') && (r < 'a' || r > 'f')
	}) {
		return nil, false
	}
	mac, err := hex.DecodeString(s)
	return mac, err == nil
}

// SignStripe returns the Stripe-Signature header value "t=<unix>,v1=<hex>"
// that Stripe would send for body signed with secret at t. It is for demos,
// load generators and tests.
func SignStripe(secret string, t time.Time, body []byte) string {
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := hmacSHA256([]byte(secret), []byte(timestamp), []byte("."), body)
	return "t=" + timestamp + ",v1=" + hex.EncodeToString(mac)
}
