package provider

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"
)

// request is a delivery as a provider sends it: its headers and raw body.
type request struct {
	header http.Header
	body   []byte
}

// clone returns a deep copy of r, for cases that alter it.
func (r request) clone() request {
	return request{header: r.header.Clone(), body: bytes.Clone(r.body)}
}

// signer describes how one provider delivers, for the conformance suite.
// Signatures come from the providers' own SDKs where one exists (stripe-go,
// the Standard Webhooks Go library) and from the tests' own HMAC otherwise,
// never from the Sign* helpers under test.
//
// The fields above the blank line are required; the others default to what
// suits a scheme that signs a JSON body in a header.
type signer struct {
	// provider is the registry name.
	provider string
	// secrets are an old and a new secret, both configured during a
	// rotation, and unknownSecret is well formed but never configured.
	secrets       [2]string
	unknownSecret string
	// body returns a well-formed body carrying one event per id, in order.
	// Each id appears in it literally; "" means an event without an id. A
	// non-batching provider is only ever asked for one id.
	body func(ids ...string) []byte
	// sign returns the request delivering body signed with secret at at. id
	// is the event id of a scheme that carries it in a header ("" omits the
	// header); others ignore it. A scheme that signs inside the body
	// (Adyen) returns the body it signed.
	sign func(t *testing.T, secret string, at time.Time, id string, body []byte) request
	// want returns the ID, Type and TwinKey of the events a delivery of
	// body(ids...) yields; Payload and ParseError are ignored.
	want func(ids ...string) []Event
	// signature reads the encoded signature (of the first item, in a batch
	// signed per item), and setSignature returns a copy of r carrying
	// encoded instead.
	signature    func(r request) string
	setSignature func(r request, encoded string) request
	// decode and encode convert between a signature's MAC and its encoding.
	decode func(encoded string) ([]byte, error)
	encode func(mac []byte) string

	// config returns the verifier config for secrets with whatever else the
	// provider needs (URL, Algorithm). Nil means the secrets alone. The
	// suite pins Now and, when basicAuth is set, adds conformanceBasicAuth.
	config func(secrets ...string) *Config
	// signatureHeader names the header carrying the signature, which the
	// delivery must keep for audit; "" when the signature travels in the
	// body (Adyen), which SignHeaders cannot produce.
	signatureHeader string
	// dropSignature returns copies of r whose signature is absent or empty,
	// which must be ErrSignatureMissing. Nil means deleting signatureHeader
	// and setting it empty.
	dropSignature func(r request) []request
	// wrongPrefixes returns copies of r whose signature carries an algorithm
	// or version prefix the scheme must refuse; nil when it has none.
	wrongPrefixes func(r request) []request
	// timestamped is set when the scheme signs a timestamp, and
	// timestampHeader names the header carrying it alone (empty when the
	// timestamp travels in the signature header).
	timestamped     bool
	timestampHeader string
	// basicAuth is set when the provider requires HTTP Basic credentials:
	// the suite configures conformanceBasicAuth and sends the new pair.
	basicAuth bool
	// batch is set when one delivery carries several events (Marqeta,
	// Adyen); their payloads are then items of the body, not the body.
	batch bool
	// formBody is set when the body is a form (Twilio), not JSON: the JSON
	// parse-error cases are skipped and payloads are not the raw body.
	formBody bool
	// idFromBody is set when the event id is read from the body, so that it
	// is unknown when the body cannot be parsed.
	idFromBody bool
	// emptyBody is the sentinel an authentic empty body is refused with
	// (Square); nil when it is authentic and yields a ParseError.
	emptyBody error
	// tamper returns altered copies of a signed body that its signature
	// must not verify. Nil means: a byte changed, a newline appended, the
	// last byte dropped, a space prepended.
	tamper func(body []byte) [][]byte
	// pad returns body grown by about n bytes and still well formed. Nil
	// means n spaces after the first byte (JSON), or a padding parameter
	// (formBody).
	pad func(body []byte, n int) []byte
}

// conformanceBasicAuth are an old and a new pair of Basic credentials,
// configured together for providers that require Basic Auth.
var conformanceBasicAuth = [2]BasicAuth{
	{Username: "hookinbox-old", Password: "Old-passw0rd!conformance"},
	{Username: "hookinbox-new", Password: "New-passw0rd!conformance"},
}

// conformanceSigners holds one signer constructor per provider.
var conformanceSigners []func() signer

// registerConformance adds a provider's signer to the conformance suite.
// Each provider's _test.go file calls it from its init; the suite then runs
// every case against the provider.
func registerConformance(newSigner func() signer) {
	conformanceSigners = append(conformanceSigners, newSigner)
}

func init() {
	registerConformance(stripeSigner)
	registerConformance(shopifySigner)
}

// newConfig returns the verifier config of a source with secrets, pinned
// at testNow.
func (s signer) newConfig(secrets ...string) *Config {
	config := &Config{Secrets: secrets}
	if s.config != nil {
		config = s.config(secrets...)
	}
	config.Now = func() time.Time { return testNow }
	if s.basicAuth && config.BasicAuth == nil {
		config.BasicAuth = conformanceBasicAuth[:]
	}
	return config
}

// deliver signs body as the provider would, adding Basic credentials when
// the provider requires them.
func (s signer) deliver(t *testing.T, secret string, at time.Time, id string, body []byte) request {
	t.Helper()
	r := s.sign(t, secret, at, id, body)
	if r.header == nil {
		r.header = http.Header{}
	}
	if s.basicAuth && r.header.Get("Authorization") == "" {
		setBasicAuth(r.header, conformanceBasicAuth[1])
	}
	return r
}

// valid returns a genuine delivery of body(ids...) signed with the old
// secret at testNow.
func (s signer) valid(t *testing.T, ids ...string) request {
	t.Helper()
	return s.deliver(t, s.secrets[0], testNow, ids[0], s.body(ids...))
}

// tampered returns altered copies of body that its signature must not
// verify.
func (s signer) tampered(body []byte) [][]byte {
	if s.tamper != nil {
		return s.tamper(body)
	}
	changed := bytes.Clone(body)
	changed[len(changed)/2] ^= 0x01
	return [][]byte{
		changed,
		append(bytes.Clone(body), '\n'),
		body[:len(body)-1],
		append([]byte{' '}, body...),
	}
}

// dropped returns copies of r without a signature.
func (s signer) dropped(r request) []request {
	if s.dropSignature != nil {
		return s.dropSignature(r)
	}
	deleted, empty := r.clone(), r.clone()
	deleted.header.Del(s.signatureHeader)
	empty.header.Set(s.signatureHeader, "")
	return []request{deleted, empty}
}

// padded returns body grown by about n bytes.
func (s signer) padded(body []byte, n int) []byte {
	switch {
	case s.pad != nil:
		return s.pad(body, n)
	case s.formBody:
		return append(append(bytes.Clone(body), "&Padding="...), bytes.Repeat([]byte("x"), n)...)
	}
	out := make([]byte, 0, len(body)+n)
	out = append(out, body[0])
	out = append(out, bytes.Repeat([]byte(" "), n)...)
	return append(out, body[1:]...)
}

// secretsNotToQuote are every credential an error message must not contain.
func (s signer) secretsNotToQuote() []string {
	out := []string{s.secrets[0], s.secrets[1], s.unknownSecret}
	for _, cred := range conformanceBasicAuth {
		out = append(out, cred.Password)
	}
	return out
}

// conformanceJSON is the body of the conformance event of a JSON provider
// whose event id and type are the body's "id" and "type"; id is also there
// for header-keyed providers, so that every id appears in the body.
func conformanceJSON(ids ...string) []byte {
	return []byte(`{"id":"` + ids[0] + `","type":"order.created","data":{"object":{"id":"ord_1"}}}`)
}

// wantOne returns a want func for single-event providers whose events have
// the given type and no twin key.
func wantOne(typ string) func(ids ...string) []Event {
	return func(ids ...string) []Event { return []Event{{ID: ids[0], Type: typ}} }
}

// headerSignature returns signature and setSignature funcs for a signature
// carried in header name after prefix.
func headerSignature(name, prefix string) (func(request) string, func(request, string) request) {
	get := func(r request) string { return strings.TrimPrefix(r.header.Get(name), prefix) }
	set := func(r request, encoded string) request {
		out := r.clone()
		out.header.Set(name, prefix+encoded)
		return out
	}
	return get, set
}

// replacePrefix returns copies of r whose header name has its prefix
// replaced by each of prefixes.
func replacePrefix(r request, name, prefix string, prefixes ...string) []request {
	encoded := strings.TrimPrefix(r.header.Get(name), prefix)
	out := make([]request, len(prefixes))
	for i, p := range prefixes {
		out[i] = r.clone()
		out[i].header.Set(name, p+encoded)
	}
	return out
}

func stripeSigner() signer {
	const prefix = ",v1="
	return signer{
		provider:      "stripe",
		secrets:       [2]string{"whsec_old_secret", "whsec_new_secret"},
		unknownSecret: "whsec_unknown_secret",
		body:          conformanceJSON,
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
			return request{header: http.Header{"Stripe-Signature": {signed.Header}}, body: body}
		},
		want: wantOne("order.created"),
		signature: func(r request) string {
			_, encoded, _ := strings.Cut(r.header.Get("Stripe-Signature"), prefix)
			return encoded
		},
		setSignature: func(r request, encoded string) request {
			out := r.clone()
			timestamp, _, _ := strings.Cut(r.header.Get("Stripe-Signature"), prefix)
			out.header.Set("Stripe-Signature", timestamp+prefix+encoded)
			return out
		},
		decode:          hex.DecodeString,
		encode:          hex.EncodeToString,
		signatureHeader: "Stripe-Signature",
		timestamped:     true,
		idFromBody:      true,
		wrongPrefixes: func(r request) []request {
			var out []request
			for _, version := range []string{"v0", "v2", "V1", "v1 ", "", "v"} {
				copied := r.clone()
				copied.header.Set("Stripe-Signature",
					strings.Replace(r.header.Get("Stripe-Signature"), prefix, ","+version+"=", 1))
				out = append(out, copied)
			}
			return out
		},
	}
}

func shopifySigner() signer {
	get, set := headerSignature("X-Shopify-Hmac-Sha256", "")
	return signer{
		provider:      "shopify",
		secrets:       [2]string{"old_app_secret", "new_app_secret"},
		unknownSecret: "unknown_app_secret",
		body:          conformanceJSON,
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			header := http.Header{}
			header.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(referenceHMAC([]byte(secret), body)))
			header.Set("X-Shopify-Topic", "order.created")
			header.Set("X-Shopify-Shop-Domain", "shop1.myshopify.io")
			header.Set("X-Shopify-Api-Version", "2025-07")
			header.Set("X-Shopify-Triggered-At", at.UTC().Format(time.RFC3339Nano))
			if id != "" {
				header.Set("X-Shopify-Webhook-Id", id)
			}
			return request{header: header, body: body}
		},
		want:            wantOne("order.created"),
		signature:       get,
		setSignature:    set,
		decode:          base64.StdEncoding.DecodeString,
		encode:          base64.StdEncoding.EncodeToString,
		signatureHeader: "X-Shopify-Hmac-Sha256",
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, "X-Shopify-Hmac-Sha256", "", "sha256=", "v1,", " ")
		},
	}
}

// requireSignerWellFormed fails when a registered signer lacks a required
// field, so that a new signer's mistake reads as such.
func requireSignerWellFormed(t *testing.T, s signer) {
	t.Helper()
	require.NotEmpty(t, s.provider)
	require.NotEmpty(t, s.secrets[0], s.provider)
	require.NotEmpty(t, s.secrets[1], s.provider)
	require.NotEmpty(t, s.unknownSecret, s.provider)
	for name, fn := range map[string]any{
		"body": s.body, "sign": s.sign, "want": s.want, "signature": s.signature,
		"setSignature": s.setSignature, "decode": s.decode, "encode": s.encode,
	} {
		require.NotNil(t, fn, "signer %s has no %s", s.provider, name)
	}
	if s.signatureHeader == "" {
		require.NotNil(t, s.dropSignature, "signer %s signs in the body and needs dropSignature", s.provider)
	}
}

// setBasicAuth sets header's Authorization to cred.
func setBasicAuth(header http.Header, cred BasicAuth) {
	req := http.Request{Header: header}
	req.SetBasicAuth(cred.Username, cred.Password)
}
