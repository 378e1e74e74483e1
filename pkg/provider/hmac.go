package provider

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
)

func init() {
	register("hmac", adapt(newHMACVerifier), Preset{})
}

// hmacVerifier verifies deliveries of any sender that signs with an HMAC, as
// configured by Config.HMAC (HMACConfig's fields, with their defaults):
//
//   - Header (required) carries the signature, after Prefix ("sha256=";
//     default none), which must be there exactly.
//   - Config.Algorithm is sha1, sha256 (the default) or sha512.
//   - Encoding is hex (the default: lower case, or all upper case for a
//     sender that writes it so, never mixed) or base64 (standard, padded,
//     canonical). The signature must decode to exactly one MAC of the
//     algorithm's size; it is compared as bytes, in constant time.
//   - The signed content is the raw body, or Template with {body} (required
//     in a template, so the body is always signed), {timestamp} (the value
//     of TimestampHeader, which then must be canonical unix seconds within
//     Config.Tolerance of now, in both directions) and {id} (the value of
//     IDHeader) replaced. TimestampHeader is an error without {timestamp}:
//     an unsigned timestamp proves nothing.
//   - The event id comes from IDHeader or IDPath, a dotted path of object
//     members into the JSON body ("data.id"), whose value is a string or a
//     number; one of the two is required. An id that PostgreSQL cannot store
//     (not UTF-8, a NUL, over 1024 bytes) counts as none. The type comes from TypeHeader or
//     TypePath, or is empty. An id header that the template does not sign
//     can be changed by whoever replays a captured delivery: sign it with
//     {id} when the sender does.
//   - Config.BasicAuth, when non-empty, and APIKeyHeader with APIKeys, when
//     set, are required as well as the signature: every check must pass.
//   - ChallengePath, when set, makes a verified JSON delivery with a
//     non-empty string at that path a handshake: the string is answered as
//     text/plain with 200 and nothing is stored.
//
// Any secret of Config.Secrets may match. There is one event per delivery.
type hmacVerifier struct {
	keys            keyring
	header, prefix  string
	base64          bool
	template        sign.Template // nil: the raw body is signed
	timestampHeader string
	idHeader        string
	idPath          []string
	typeHeader      string
	typePath        []string
	apiKeyHeader    string
	apiKeys         [][sha256.Size]byte
	basicAuth       []BasicAuth
	challengePath   []string
	tolerance       time.Duration
	now             func() time.Time
}

// newHMACVerifier returns a generic HMAC verifier configured by config.HMAC;
// see HMAC for the fields. Config.Secrets are required; Config.Tolerance and
// Config.Now apply to a templated {timestamp}.
func newHMACVerifier(config *Config) (*hmacVerifier, error) {
	v, err := newHMAC(config)
	if err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	return v, nil
}

// Verify implements Verifier.
func (v *hmacVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	if err := v.checkCredentials(header); err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	mac, err := v.signature(header)
	if err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	var timestamp, signedID string
	var signedAt time.Time
	if v.template.Uses("timestamp") {
		if timestamp, signedAt, err = signedTimestamp(header, v.timestampHeader); err != nil {
			return nil, fmt.Errorf("hmac: %w", err)
		}
	}
	if v.template.Uses("id") {
		if signedID = header.Get(v.idHeader); signedID == "" {
			return nil, fmt.Errorf("hmac: no %s header, which is signed: %w", v.idHeader, ErrSignatureMissing)
		}
	}
	if !v.keys.matches([][]byte{mac}, v.template.Signed(body, timestamp, signedID)...) {
		return nil, fmt.Errorf("hmac: %s matches no configured secret: %w", v.header, ErrSignatureInvalid)
	}
	if v.template.Uses("timestamp") {
		if err := checkTimestamp(v.now(), signedAt, v.tolerance); err != nil {
			return nil, fmt.Errorf("hmac: %w", err)
		}
	}
	return v.delivery(body, header), nil
}

// delivery builds the answer to an authentic delivery: a handshake reply,
// or its event.
func (v *hmacVerifier) delivery(body []byte, header http.Header) *Delivery {
	p := parsePayload(body)
	if v.challengePath != nil && p.err == nil {
		if challenge := p.path(v.challengePath...); challenge != "" {
			return &Delivery{Reply: &Reply{Status: http.StatusOK, ContentType: "text/plain", Body: []byte(challenge)}}
		}
	}
	id, idSource := header.Get(v.idHeader), "header "+v.idHeader
	if v.idPath != nil {
		id, idSource = p.scalar(v.idPath...), fmt.Sprintf("the body's %q", strings.Join(v.idPath, "."))
	}
	typ := header.Get(v.typeHeader)
	if v.typePath != nil {
		typ = p.scalar(v.typePath...)
	}
	event := p.event(body, id, typ, idSource)
	return newDelivery(event, header, v.header, v.timestampHeader, v.idHeader, v.typeHeader)
}

// checkCredentials checks the API key and Basic Auth, when configured.
func (v *hmacVerifier) checkCredentials(header http.Header) error {
	if v.apiKeyHeader != "" {
		key := header.Get(v.apiKeyHeader)
		if key == "" {
			return fmt.Errorf("no %s header: %w", v.apiKeyHeader, ErrSignatureMissing)
		}
		// Hashing first makes the comparison independent of the key's length.
		if !anyDigestEqual(sha256.Sum256([]byte(key)), v.apiKeys) {
			return fmt.Errorf("%s matches no configured API key: %w", v.apiKeyHeader, ErrSignatureInvalid)
		}
	}
	if len(v.basicAuth) > 0 {
		return checkBasicAuth(header, v.basicAuth)
	}
	return nil
}

// signature returns the decoded MAC of the signature header.
func (v *hmacVerifier) signature(header http.Header) ([]byte, error) {
	value, err := requiredHeader(header, v.header)
	if err != nil {
		return nil, err
	}
	encoded, ok := strings.CutPrefix(value, v.prefix)
	if !ok {
		return nil, fmt.Errorf("%s does not start with the configured prefix: %w", v.header, ErrSignatureInvalid)
	}
	var mac []byte
	switch {
	case v.base64:
		if mac, ok = decodeBase64MAC(encoded, v.keys.size); !ok {
			return nil, fmt.Errorf("%s is not the padded standard base64 of a %d-byte MAC: %w", v.header, v.keys.size, ErrSignatureInvalid)
		}
	default:
		if strings.ToUpper(encoded) == encoded { // a sender that writes upper case throughout
			encoded = strings.ToLower(encoded)
		}
		if mac, ok = decodeHexMAC(encoded, v.keys.size); !ok {
			return nil, fmt.Errorf("%s is not %d hex digits of one case: %w", v.header, 2*v.keys.size, ErrSignatureInvalid)
		}
	}
	return mac, nil
}
