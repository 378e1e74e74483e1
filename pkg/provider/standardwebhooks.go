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

// Svix's branded names for the Standard Webhooks headers.
const (
	svixIDHeader        = "svix-id"
	svixTimestampHeader = "svix-timestamp"
	svixSignatureHeader = "svix-signature"
)

// standardWebhooksHeaders names the three headers of one header set.
type standardWebhooksHeaders struct {
	id, timestamp, signature string
}

var (
	standardWebhooksHeaderSet = standardWebhooksHeaders{
		standardWebhooksIDHeader, standardWebhooksTimestampHeader, standardWebhooksSignatureHeader,
	}
	svixHeaderSet = standardWebhooksHeaders{svixIDHeader, svixTimestampHeader, svixSignatureHeader}
)

func init() {
	register("standardwebhooks", adapt(NewStandardWebhooks), Preset{})
	registerSigner("standardwebhooks", func(p *SignParams) (http.Header, error) {
		return signStandardWebhooksHeaders(p, standardWebhooksHeaderSet)
	})
	register("svix", adapt(NewSvix), Preset{})
	registerSigner("svix", func(p *SignParams) (http.Header, error) {
		return signStandardWebhooksHeaders(p, svixHeaderSet)
	})
}

// signStandardWebhooksHeaders returns the headers of params under names.
func signStandardWebhooksHeaders(params *SignParams, names standardWebhooksHeaders) (http.Header, error) {
	sig, err := SignStandardWebhooks(params.Secret, params.EventID, params.Time, params.Body)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	header.Set(names.id, params.EventID)
	header.Set(names.timestamp, strconv.FormatInt(params.Time.Unix(), 10))
	header.Set(names.signature, sig)
	return header, nil
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
//
// The svix provider (NewSvix) is the same scheme under Svix's header names.
type StandardWebhooks struct {
	name      string // the provider name errors start with
	svix      bool   // svix-* headers first, webhook-* as a fallback
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// NewStandardWebhooks returns a Standard Webhooks verifier. Each secret in
// config is "whsec_<base64 key>", or the base64 key alone; a secret that is
// not valid standard base64 or decodes to no bytes is an error.
// Config.Tolerance and Config.Now apply.
func NewStandardWebhooks(config *Config) (*StandardWebhooks, error) {
	return newStandardWebhooks("standardwebhooks", false, config)
}

// NewSvix returns a verifier for Svix deliveries: the Standard Webhooks
// scheme with the headers svix-id, svix-timestamp and svix-signature. Like
// Svix's own libraries it falls back to the webhook-* headers, but only as a
// whole set: when any svix-* header is present, the three svix-* headers are
// the ones read. Secrets, events and errors are as for NewStandardWebhooks.
func NewSvix(config *Config) (*StandardWebhooks, error) {
	return newStandardWebhooks("svix", true, config)
}

func newStandardWebhooks(name string, svix bool, config *Config) (*StandardWebhooks, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	config = config.withDefaults()
	keys := make([][]byte, len(config.Secrets))
	for i, secret := range config.Secrets {
		key, err := standardWebhooksKey(secret)
		if err != nil {
			return nil, fmt.Errorf("%s: secret %d: %w", name, i, err)
		}
		keys[i] = key
	}
	return &StandardWebhooks{name: name, svix: svix, keys: keys, tolerance: config.Tolerance, now: config.Now}, nil
}

// headerNames returns the header set a delivery is read from.
func (s *StandardWebhooks) headerNames(header http.Header) standardWebhooksHeaders {
	if s.svix && (header.Get(svixIDHeader) != "" || header.Get(svixTimestampHeader) != "" ||
		header.Get(svixSignatureHeader) != "") {
		return svixHeaderSet
	}
	return standardWebhooksHeaderSet
}

// Verify implements Verifier. A delivery without webhook-id is verified
// over an empty id; if it is authentic its event has a ParseError.
func (s *StandardWebhooks) Verify(body []byte, header http.Header) (*Delivery, error) {
	names := s.headerNames(header)
	signatures := header.Get(names.signature)
	if signatures == "" {
		return nil, fmt.Errorf("%s: no %s header: %w", s.name, names.signature, ErrSignatureMissing)
	}
	timestamp := header.Get(names.timestamp)
	if timestamp == "" {
		return nil, fmt.Errorf("%s: no %s header: %w", s.name, names.timestamp, ErrSignatureMissing)
	}
	signedAt, err := parseUnix(timestamp)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", s.name, names.timestamp, err)
	}
	id := header.Get(names.id)
	if !s.matches(signatures, id, timestamp, body) {
		return nil, fmt.Errorf("%s: no v1 signature matches a configured secret: %w", s.name, ErrSignatureInvalid)
	}
	if err := checkTimestamp(s.now(), signedAt, s.tolerance); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	p := parsePayload(body)
	event := p.event(body, id, p.str("type"), "header "+names.id)
	return newDelivery(event, header, names.id, names.timestamp, names.signature), nil
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
