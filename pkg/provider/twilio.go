package provider

import (
	"cmp"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Headers of a Twilio webhook request.
const (
	twilioSignatureHeader   = "X-Twilio-Signature"
	twilioIdempotencyHeader = "I-Twilio-Idempotency-Token"
)

func init() {
	register("twilio", adapt(newTwilioVerifier), Preset{})
}

// twilioVerifier verifies Twilio webhook requests (Programmable Messaging and
// Voice callbacks, Event Streams webhook sinks). X-Twilio-Signature is the
// standard base64 of HMAC-SHA1, keyed with the account's Auth Token, of one of
// two strings:
//
//   - a form POST (application/x-www-form-urlencoded, the usual case): the
//     webhook URL followed by every POST parameter's name and value, sorted,
//     with no separators;
//   - a JSON POST: the webhook URL with "bodySHA256=<hex SHA-256 of the
//     body>" added to its query, and no parameters. Twilio sends the request
//     to that URL. The receiver never sees the request URL, only the body, so
//     it recomputes the hash from the body and adds it to the configured URL
//     itself: the signature then covers the exact bytes.
//
// Both are tried for every request, whatever its Content-Type (which is not
// signed): the JSON form first, then the body parsed as form parameters.
// Which one matched decides how the body is read.
//
// The URL is Config.URL exactly as configured at Twilio, query string
// included, never rebuilt from the request. Like Twilio's own helper
// libraries it is also tried with the scheme's default port added (":443"
// for https, ":80" for http) when it has none, or with its port removed
// when it has one, because Twilio's signing is inconsistent about ports. A
// URL with a "#…" fragment (Twilio's connection overrides) is also tried
// without the fragment [unverified which one Twilio signs].
//
// Parameters are sorted by name, then value, as Twilio documents and its
// Python and Node libraries do; the order of twilio-go, which sorts the
// name+value strings, is also accepted when it differs (it can only differ
// when one name is a prefix of another). Repeated values are not merged.
//
// The form scheme is weaker than a body hash, and only Twilio can change it:
// it signs the decoded parameters, not the bytes, and "ab"+"c" signs like
// "a"+"bc", so a captured request can be re-encoded without breaking its
// signature.
// Nothing signed carries a time either, so there is no tolerance: replays are
// stopped by the inbox's dedup key.
//
// Twilio sends one event per request. Its ID is the I-Twilio-Idempotency-Token
// header, which Twilio keeps across its own retries. Without it, the ID is
// the resource's Sid and status, "<Sid>:<status>" ("SM…:delivered"), from the
// first of TranscriptionSid/TranscriptionStatus, RecordingSid/RecordingStatus,
// MessageSid (SmsSid, SmsMessageSid)/MessageStatus (SmsStatus) and
// CallSid/CallStatus that is present, or the Sid alone when its status is
// absent. Beware that this fallback merges two voice requests of one call
// with the same status (two <Gather> results while "in-progress"); it is
// only used without the token, which Twilio's webhooks carry [unverified in
// Twilio's docs]. A JSON body without either falls back to its top-level
// "id" (an Event Streams CloudEvent).
//
// Its Type is "<resource>.<status>" from the same fields ("message.delivered",
// "call.completed", "recording.completed"), "<resource>" when there is no
// status, and for a JSON body without those fields its top-level "type"
// ("com.twilio.messaging.message.delivered").
//
// A form body is stored as a JSON object of its parameters, {"Name":"value"},
// a parameter sent more than once as an array of its values in order; the
// raw bytes are kept as the delivery's body. A JSON body is stored as is and
// must be a JSON object. Twilio has no twin key.
//
// Webhook Rules' X-Twilio-Webhooks-Signature-Settings (HMAC-SHA256 with a
// shared key) is not supported.
type twilioVerifier struct {
	tokens keyring
	urls   []sign.TwilioURL
}

// newTwilioVerifier returns a Twilio verifier. Config.Secrets are Auth Tokens
// (the primary and, while promoting, the secondary); Config.URL is required.
// Config.Tolerance and Config.Now are not used.
func newTwilioVerifier(config *Config) (*twilioVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("twilio: %w", err)
	}
	urls, err := twilioURLs(config.URL)
	if err != nil {
		return nil, fmt.Errorf("twilio: %w", err)
	}
	return &twilioVerifier{tokens: newKeyring(sha1.New, config.Secrets), urls: urls}, nil
}

// Verify implements Verifier.
func (tw *twilioVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	signature, err := requiredHeader(header, twilioSignatureHeader)
	if err != nil {
		return nil, fmt.Errorf("twilio: %w", err)
	}
	mac, ok := decodeBase64MAC(signature, sha1.Size)
	if !ok {
		return nil, fmt.Errorf("twilio: %s is not the padded standard base64 of an HMAC-SHA1: %w",
			twilioSignatureHeader, ErrSignatureInvalid)
	}
	if tw.matchesJSON(mac, body) {
		p := parsePayload(body)
		return tw.delivery(p, body, header, func(name string) string { return storableKey(p.str(name)) }, true), nil
	}
	// The form scheme signs the decoded parameters, not the bytes: the body
	// is parsed as a form to check it, and trusted only if it matches.
	if params, err := url.ParseQuery(string(body)); err == nil && tw.matchesForm(mac, params) {
		content, err := twilioFormPayload(body, params)
		field := func(name string) string { return storableKey(params.Get(name)) }
		return tw.delivery(payload{err: err}, content, header, field, false), nil
	}
	return nil, fmt.Errorf("twilio: %s matches no configured auth token for the configured url: %w",
		twilioSignatureHeader, ErrSignatureInvalid)
}

// delivery builds the event of an authentic request whose storable content
// (the JSON body, or the JSON object of the form parameters) is content and
// whose fields are read with field.
func (tw *twilioVerifier) delivery(p payload, content []byte, header http.Header, field func(string) string, isJSON bool) *Delivery {
	resource, sid, status := twilioResource(field)
	id := storableKey(header.Get(twilioIdempotencyHeader))
	if id == "" && sid != "" {
		id = sid
		if status != "" {
			id += ":" + status
		}
	}
	typ := resource
	if status != "" {
		typ += "." + status
	}
	if isJSON {
		id = cmp.Or(id, field("id"))
		typ = cmp.Or(typ, field("type"))
	}
	event := p.event(content, id, typ, "header "+twilioIdempotencyHeader+" and a Sid parameter")
	return newDelivery(event, header, twilioSignatureHeader, twilioIdempotencyHeader)
}

// twilioResources are the kinds of resource a Twilio callback reports on,
// most specific first: a recording callback also carries its CallSid.
var twilioResources = []struct {
	name     string
	sids     []string
	statuses []string
}{
	{"transcription", []string{"TranscriptionSid"}, []string{"TranscriptionStatus"}},
	{"recording", []string{"RecordingSid"}, []string{"RecordingStatus"}},
	{"message", []string{"MessageSid", "SmsSid", "SmsMessageSid"}, []string{"MessageStatus", "SmsStatus"}},
	{"call", []string{"CallSid"}, []string{"CallStatus"}},
}

// twilioResource returns the first resource whose Sid field is set, with
// its Sid and status; all empty when there is none.
func twilioResource(field func(string) string) (resource, sid, status string) {
	for _, r := range twilioResources {
		for _, name := range r.sids {
			if sid = field(name); sid == "" {
				continue
			}
			for _, name := range r.statuses {
				if status = field(name); status != "" {
					break
				}
			}
			return r.name, sid, status
		}
	}
	return "", "", ""
}

// matchesJSON reports whether mac signs the configured URL with the body's
// SHA-256 in its query, under any token.
func (tw *twilioVerifier) matchesJSON(mac, body []byte) bool {
	sum := sha256.Sum256(body)
	bodyHash := hex.EncodeToString(sum[:])
	for _, u := range tw.urls {
		if tw.tokens.matches([][]byte{mac}, []byte(u.WithBodyHash(bodyHash))) {
			return true
		}
	}
	return false
}

// matchesForm reports whether mac signs the configured URL and the form
// parameters, in either accepted order, under any token.
func (tw *twilioVerifier) matchesForm(mac []byte, params url.Values) bool {
	orders := sign.TwilioParamOrders(params)
	for _, u := range tw.urls {
		for _, params := range orders {
			if tw.tokens.matches([][]byte{mac}, sign.TwilioSigned(u.String(), params)...) {
				return true
			}
		}
	}
	return false
}
