package provider

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of a Standard Webhooks delivery, and the prefix of its secrets.
const (
	standardWebhooksIDHeader        = "webhook-id"
	standardWebhooksTimestampHeader = "webhook-timestamp"
	standardWebhooksSignatureHeader = "webhook-signature"
	standardWebhooksSecretPrefix    = "whsec_"
)

func init() {
	register("standardwebhooks", adapt(NewStandardWebhooks), Preset{})
	registerSigner("standardwebhooks", func(p *SignParams) (http.Header, error) {
		sig, err := SignStandardWebhooks(p.Secret, p.EventID, p.Time, p.Body)
		if err != nil {
			return nil, err
		}
		return http.Header{
			"Webhook-Id":        {p.EventID},
			"Webhook-Timestamp": {strconv.FormatInt(p.Time.Unix(), 10)},
			"Webhook-Signature": {sig},
		}, nil
	})
}

// StandardWebhooks verifies deliveries signed per the Standard Webhooks
// specification (v1.0.0), as sent by Svix and others. webhook-signature is
// a space-separated list of "<version>,<base64>" entries; each v1 entry is
// the standard base64 of HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<raw
// body>", keyed with the base64-decoded secret. The delivery is authentic
// when any v1 entry matches any secret (a sender signs with the old and the
// new key while rotating); v1a (ed25519) and unknown versions are skipped.
// Like the official libraries, it refuses timestamps too old or too new.
//
// Signatures are compared as encoded strings, in constant time, so that a
// signature has exactly one accepted spelling (see Shopify).
//
// There is one event per delivery. Its ID is webhook-id, which stays the
// same across retries, and its Type is the body's "type".
type StandardWebhooks struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// NewStandardWebhooks returns a Standard Webhooks verifier. Each secret in
// config is "whsec_<base64 key>", or the base64 key alone; a secret that is
// not valid standard base64 or decodes to no bytes is an error.
// Config.Tolerance and Config.Now apply.
func NewStandardWebhooks(config *Config) (*StandardWebhooks, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("standardwebhooks: %w", err)
	}
	config = config.withDefaults()
	keys := make([][]byte, len(config.Secrets))
	for i, secret := range config.Secrets {
		key, err := standardWebhooksKey(secret)
		if err != nil {
			return nil, fmt.Errorf("standardwebhooks: secret %d: %w", i, err)
		}
		keys[i] = key
	}
	return &StandardWebhooks{keys: keys, tolerance: config.Tolerance, now: config.Now}, nil
}

// Verify implements Verifier. A delivery without webhook-id is verified
// over an empty id; if it is authentic its event has a ParseError.
func (s *StandardWebhooks) Verify(body []byte, header http.Header) (*Delivery, error) {
	signatures := header.Get(standardWebhooksSignatureHeader)
	if signatures == "" {
		return nil, fmt.Errorf("standardwebhooks: no %s header: %w", standardWebhooksSignatureHeader, ErrSignatureMissing)
	}
	timestamp := header.Get(standardWebhooksTimestampHeader)
	if timestamp == "" {
		return nil, fmt.Errorf("standardwebhooks: no %s header: %w", standardWebhooksTimestampHeader, ErrSignatureMissing)
	}
	signedAt, err := parseUnix(timestamp)
	if err != nil {
		return nil, fmt.Errorf("standardwebhooks: %s: %w", standardWebhooksTimestampHeader, err)
	}
	id := header.Get(standardWebhooksIDHeader)
	if !s.matches(signatures, id, timestamp, body) {
		return nil, fmt.Errorf("standardwebhooks: no v1 signature matches a configured secret: %w", ErrSignatureInvalid)
	}
	if err := checkTimestamp(s.now(), signedAt, s.tolerance); err != nil {
		return nil, fmt.Errorf("standardwebhooks: %w", err)
	}
	p := parsePayload(body)
	event := p.event(body, id, p.str("type"), "header "+standardWebhooksIDHeader)
	return newDelivery(event, header,
		standardWebhooksIDHeader, standardWebhooksTimestampHeader, standardWebhooksSignatureHeader), nil
}

// matches reports whether any v1 entry of signatures is the encoded HMAC of
// the delivery under any key.
func (s *StandardWebhooks) matches(signatures, id, timestamp string, body []byte) bool {
	for _, key := range s.keys {
		expected := []byte(signStandardWebhooks(key, id, timestamp, body))
		for entry := range strings.SplitSeq(signatures, " ") {
			version, signature, _ := strings.Cut(entry, ",")
			if version == "v1" && hmac.Equal([]byte(signature), expected) {
				return true
			}
		}
	}
	return false
}

// standardWebhooksKey decodes a "whsec_<base64>" (or bare base64) secret.
// Its errors never quote the secret.
func standardWebhooksKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, standardWebhooksSecretPrefix))
	if err != nil {
		return nil, errors.New("secret is not whsec_ followed by standard base64")
	}
	if len(key) == 0 {
		return nil, errors.New("secret has an empty key")
	}
	return key, nil
}

// signStandardWebhooks returns the base64 v1 signature of a delivery.
func signStandardWebhooks(key []byte, id, timestamp string, body []byte) string {
	mac := hmacSHA256(key, []byte(id), []byte("."), []byte(timestamp), []byte("."), body)
	return base64.StdEncoding.EncodeToString(mac)
}

// SignStandardWebhooks returns the webhook-signature header value
// "v1,<base64>" for a delivery of body with webhook-id msgID and
// webhook-timestamp t, signed with secret ("whsec_<base64>"). It is for
// demos, load generators and tests; it fails only on a malformed secret.
func SignStandardWebhooks(secret, msgID string, t time.Time, body []byte) (string, error) {
	key, err := standardWebhooksKey(secret)
	if err != nil {
		return "", fmt.Errorf("standardwebhooks: %w", err)
	}
	return "v1," + signStandardWebhooks(key, msgID, strconv.FormatInt(t.Unix(), 10), body), nil
}
