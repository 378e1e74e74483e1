package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Headers of a Standard Webhooks delivery.
const (
	standardWebhooksIDHeader        = "webhook-id"
	standardWebhooksTimestampHeader = "webhook-timestamp"
	standardWebhooksSignatureHeader = "webhook-signature"
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
	register("standardwebhooks", adapt(newStandardWebhooksVerifier), Preset{})
	register("svix", adapt(newSvixVerifier), Preset{})
}

// standardWebhooksVerifier verifies deliveries signed per the Standard Webhooks
// specification (v1.0.0), as sent by Svix and others. webhook-signature is a
// space-separated list of "<version>,<base64>" entries; each v1 entry is the
// standard base64 of HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<raw
// body>", keyed with the base64-decoded secret. The delivery is authentic when
// any v1 entry matches any secret (a sender signs with the old and the new key
// while rotating); v1a (ed25519) and unknown versions are skipped. Like the
// official libraries, it refuses timestamps too old or too new.
//
// Only the canonical base64 spelling of a signature is accepted (see
// Shopify).
//
// There is one event per delivery. Its ID is webhook-id, which stays the
// same across retries, and its Type is the body's "type".
//
// The svix provider (newSvixVerifier) is the same scheme under Svix's header
// names.
type standardWebhooksVerifier struct {
	name      string // the provider name errors start with
	svix      bool   // svix-* headers first, webhook-* as a fallback
	keys      keyring
	tolerance time.Duration
	now       func() time.Time
}

// newStandardWebhooksVerifier returns a Standard Webhooks verifier. Each secret
// in config is "whsec_<base64 key>", or the base64 key alone; a secret that is
// not valid standard base64 or decodes to no bytes is an error.
// Config.Tolerance and Config.Now apply.
func newStandardWebhooksVerifier(config *Config) (*standardWebhooksVerifier, error) {
	return newStandardWebhooks("standardwebhooks", false, config)
}

// newSvixVerifier returns a verifier for Svix deliveries: the Standard Webhooks
// scheme with the headers svix-id, svix-timestamp and svix-signature. Like
// Svix's own libraries it falls back to the webhook-* headers, but only as a
// whole set: when any svix-* header is present, the three svix-* headers are
// the ones read. Secrets, events and errors are as for NewStandardWebhooks.
func newSvixVerifier(config *Config) (*standardWebhooksVerifier, error) {
	return newStandardWebhooks("svix", true, config)
}

func newStandardWebhooks(name string, svix bool, config *Config) (*standardWebhooksVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	config = config.withDefaults()
	keys, err := newDecodedKeyring(sha256.New, config.Secrets, sign.StandardWebhooksKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &standardWebhooksVerifier{name: name, svix: svix, keys: keys, tolerance: config.Tolerance, now: config.Now}, nil
}

// headerNames returns the header set a delivery is read from.
func (s *standardWebhooksVerifier) headerNames(header http.Header) standardWebhooksHeaders {
	if s.svix && (header.Get(svixIDHeader) != "" || header.Get(svixTimestampHeader) != "" ||
		header.Get(svixSignatureHeader) != "") {
		return svixHeaderSet
	}
	return standardWebhooksHeaderSet
}

// Verify implements Verifier. A delivery without webhook-id is verified
// over an empty id; if it is authentic its event has a ParseError.
func (s *standardWebhooksVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	names := s.headerNames(header)
	signatures, err := requiredHeader(header, names.signature)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	timestamp, signedAt, err := signedTimestamp(header, names.timestamp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	id := header.Get(names.id)
	if !s.keys.matches(v1MACs(signatures), []byte(id), []byte("."), []byte(timestamp), []byte("."), body) {
		return nil, fmt.Errorf("%s: no v1 signature matches a configured secret: %w", s.name, ErrSignatureInvalid)
	}
	if err := checkTimestamp(s.now(), signedAt, s.tolerance); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	p := parsePayload(body)
	event := p.event(body, id, p.str("type"), "header "+names.id)
	return newDelivery(event, header, names.id, names.timestamp, names.signature), nil
}

// v1MACs returns the decoded MACs of the v1 entries of a webhook-signature
// header, skipping other versions and entries that are not the canonical
// base64 of a SHA-256 MAC.
func v1MACs(signatures string) [][]byte {
	var macs [][]byte
	for entry := range strings.SplitSeq(signatures, " ") {
		version, encoded, _ := strings.Cut(entry, ",")
		if mac, ok := decodeBase64MAC(encoded, sha256.Size); ok && version == "v1" {
			macs = append(macs, mac)
		}
	}
	return macs
}
