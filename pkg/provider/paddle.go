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

// paddleSignatureHeader carries Paddle's timestamp and signatures.
const paddleSignatureHeader = "Paddle-Signature"

func init() {
	register("paddle", adapt(NewPaddle), Preset{})
	registerSigner("paddle", func(p *SignParams) (http.Header, error) {
		return http.Header{paddleSignatureHeader: {SignPaddle(p.Secret, p.Time, p.Body)}}, nil
	})
}

// Paddle verifies Paddle Billing webhook deliveries. Paddle-Signature is
// "ts=<unix>;h1=<hex>"; h1 is the lowercase hex HMAC-SHA256 of
// "<ts>:<raw body>" keyed with the notification destination's secret key
// ("pdl_ntfset_…") as raw bytes. The delivery is authentic when any h1
// matches any configured secret, so that a secret can be rotated; fields
// other than ts and h1 are ignored. Paddle's SDKs refuse a timestamp older
// than 5 seconds; here Config.Tolerance applies (5 minutes by default), in
// both directions, checked after the signature.
//
// Paddle sends one event per delivery. Its ID is the body's "event_id",
// which stays the same across retries (notification_id identifies the
// delivery to one destination), and its Type is the body's "event_type".
type Paddle struct {
	secrets   [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// NewPaddle returns a Paddle verifier for the destination secret keys in
// config. Config.Tolerance and Config.Now apply.
func NewPaddle(config *Config) (*Paddle, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	config = config.withDefaults()
	secrets := make([][]byte, len(config.Secrets))
	for i, secret := range config.Secrets {
		secrets[i] = []byte(secret)
	}
	return &Paddle{secrets: secrets, tolerance: config.Tolerance, now: config.Now}, nil
}

// Verify implements Verifier.
func (p *Paddle) Verify(body []byte, header http.Header) (*Delivery, error) {
	value := header.Get(paddleSignatureHeader)
	if value == "" {
		return nil, fmt.Errorf("paddle: no %s header: %w", paddleSignatureHeader, ErrSignatureMissing)
	}
	signature, err := parsePaddleSignature(value)
	if err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	if !p.matches(signature, body) {
		return nil, fmt.Errorf("paddle: no h1 signature matches a configured secret: %w", ErrSignatureInvalid)
	}
	if err := checkTimestamp(p.now(), signature.signedAt, p.tolerance); err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	payload := parsePayload(body)
	event := payload.event(body, payload.str("event_id"), payload.str("event_type"), `the body's "event_id"`)
	return newDelivery(event, header, paddleSignatureHeader), nil
}

// matches reports whether any h1 is the HMAC of the delivery under any
// secret.
func (p *Paddle) matches(signature *paddleSignature, body []byte) bool {
	for _, secret := range p.secrets {
		expected := hmacSHA256(secret, []byte(signature.timestamp), []byte(":"), body)
		for _, h1 := range signature.h1 {
			if hmac.Equal(expected, h1) {
				return true
			}
		}
	}
	return false
}

// paddleSignature is a parsed Paddle-Signature header.
type paddleSignature struct {
	timestamp string    // ts as sent, which is what was signed
	signedAt  time.Time // ts as an instant
	h1        [][]byte  // the decoded h1 signatures
}

// parsePaddleSignature parses "ts=…;h1=…[;h1=…]". It refuses a field that is
// not one key=value pair and a second ts, and skips h1 values that are not 64
// lowercase hex digits, the only form Paddle sends.
func parsePaddleSignature(value string) (*paddleSignature, error) {
	signature := &paddleSignature{}
	for field := range strings.SplitSeq(value, ";") {
		key, val, ok := strings.Cut(field, "=")
		if !ok || strings.Contains(val, "=") {
			return nil, fmt.Errorf("header field is not key=value: %w", ErrSignatureInvalid)
		}
		switch key {
		case "ts":
			if signature.timestamp != "" {
				return nil, fmt.Errorf("header has more than one ts: %w", ErrSignatureInvalid)
			}
			signedAt, err := parseUnix(val)
			if err != nil {
				return nil, err
			}
			signature.timestamp, signature.signedAt = val, signedAt
		case "h1":
			if mac, ok := decodeLowerHexSHA256(val); ok {
				signature.h1 = append(signature.h1, mac)
			}
		}
	}
	if signature.timestamp == "" {
		return nil, fmt.Errorf("header has no ts: %w", ErrSignatureInvalid)
	}
	if len(signature.h1) == 0 {
		return nil, fmt.Errorf("header has no well-formed h1 signature: %w", ErrSignatureInvalid)
	}
	return signature, nil
}

// SignPaddle returns the Paddle-Signature header value "ts=<unix>;h1=<hex>"
// Paddle would send for body signed with secret at t. It is for demos, load
// generators and tests.
func SignPaddle(secret string, t time.Time, body []byte) string {
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := hmacSHA256([]byte(secret), []byte(timestamp), []byte(":"), body)
	return "ts=" + timestamp + ";h1=" + hex.EncodeToString(mac)
}
