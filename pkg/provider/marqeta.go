package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// marqetaSignatureHeader carries Marqeta's optional hex HMAC of the body.
const marqetaSignatureHeader = "X-Marqeta-Signature"

// marqetaPings is the category of Marqeta's health checks.
const marqetaPings = "pings"

// marqetaMaxCategoryBytes bounds a category name. Marqeta's are short words
// ("transactions", "digitalwallettokentransitions"); the bound keeps the id
// of a notification without a usable token, "<category>:sha256:<hex>",
// within maxKeyBytes.
const marqetaMaxCategoryBytes = 128

func init() {
	register("marqeta", adapt(newMarqetaVerifier), Preset{})
}

// marqetaVerifier verifies Marqeta webhook deliveries. Two checks, both of
// which must pass:
//
//   - HTTP Basic Auth, always: Marqeta requires it of every webhook, so a
//     source without Config.BasicAuth is a configuration error.
//   - X-Marqeta-Signature, when Config.Secrets is set: the lowercase hex
//     HMAC of the raw body (HMAC-SHA256, or HMAC-SHA1 with Config.Algorithm
//     "sha1") under any configured secret; upper case is refused, so that a
//     signature has one accepted spelling. Without secrets the header is not
//     checked: Marqeta's HMAC is optional.
//
// Nothing signed carries a time, so there is no tolerance; the inbox's dedup
// key is what stops a replay.
//
// The body is a batch of up to 10 notifications of one kind, an object of
// arrays keyed by category: {"transactions":[{…},…]}. Each notification is
// one Event in body order, with ID "<category>:<token>" (the notification's
// "token"), Type the category ("transactions", "cardtransitions") and
// Payload the notification's JSON object as sent. Handlers read finer kinds
// (a transaction's "type") from the payload: Marqeta's item shapes differ by
// category, and the category is the only type every notification has.
//
// A body that holds only "pings" is Marqeta's health check: it is answered
// with 200 and stored nowhere. Pings next to other categories are skipped.
//
// Authentic deliveries that cannot be stored are never errors:
//   - a notification that is not a jsonb-safe JSON object, or has no usable
//     token, is an Event with a ParseError; its ID is "<category>:<token>"
//     when that is storable text of at most 1024 bytes (and the token was
//     not read through invalid UTF-8), else
//     "<category>:sha256:<hex of its bytes>", so that a resend still
//     deduplicates;
//   - a body that is not a batch (not JSON, not an object of arrays, no
//     notification, a category name that is not UTF-8 text without NUL of at
//     most 128 bytes, more than 1000 notifications) is one Event with a
//     ParseError and no ID, which the inbox keys by the body's SHA-256.
//
// Marqeta treats any status other than exactly 200 as a failure, so Marqeta
// implements Acknowledger with 200.
type marqetaVerifier struct {
	basicAuth      []BasicAuth
	keys           keyring // no keys: the HMAC is not checked
	signaturesOnly bool    // Reverify: Basic Auth is not checked
}

// newMarqetaVerifier returns a Marqeta verifier. Config.BasicAuth is required;
// Config.Secrets and Config.Algorithm ("sha256", the default, or "sha1")
// configure the optional HMAC. Config.Tolerance and Config.Now are not used.
func newMarqetaVerifier(config *Config) (*marqetaVerifier, error) {
	if err := config.validate(); err != nil {
		return nil, fmt.Errorf("marqeta: %w", err)
	}
	if len(config.BasicAuth) == 0 && !config.signaturesOnly {
		return nil, errors.New("marqeta: basic_auth: Marqeta requires Basic Auth; configure at least one username and password")
	}
	newHash, err := sign.HashNamed(config.Algorithm, "sha1", "sha256")
	if err != nil {
		return nil, fmt.Errorf("marqeta: %w", err)
	}
	return &marqetaVerifier{basicAuth: config.BasicAuth, keys: newKeyring(newHash, config.Secrets),
		signaturesOnly: config.signaturesOnly}, nil
}

// Verify implements Verifier.
func (m *marqetaVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	if !m.signaturesOnly {
		if err := checkBasicAuth(header, m.basicAuth); err != nil {
			return nil, fmt.Errorf("marqeta: %w", err)
		}
	}
	if err := m.checkSignature(body, header); err != nil {
		return nil, fmt.Errorf("marqeta: %w", err)
	}
	events, ping := splitMarqeta(body)
	delivery := &Delivery{Events: events, Headers: auditHeaders(header, marqetaSignatureHeader)}
	if ping {
		delivery.Reply = &Reply{Status: http.StatusOK}
	}
	return delivery, nil
}

// checkSignature checks X-Marqeta-Signature when secrets are configured.
func (m *marqetaVerifier) checkSignature(body []byte, header http.Header) error {
	if len(m.keys.keys) == 0 {
		return nil
	}
	signature, err := requiredHeader(header, marqetaSignatureHeader)
	if err != nil {
		return err
	}
	mac, ok := decodeHexMAC(signature, m.keys.size)
	if !ok || !m.keys.matches([][]byte{mac}, body) {
		return fmt.Errorf("%s matches no configured secret: %w", marqetaSignatureHeader, ErrSignatureInvalid)
	}
	return nil
}

// Ack implements Acknowledger: Marqeta counts anything but exactly 200 as a
// failed delivery and sends it again.
func (m *marqetaVerifier) Ack(counts inbox.ClaimCounts) Reply {
	body, _ := json.Marshal(counts) // a struct of ints always encodes
	return Reply{Status: http.StatusOK, ContentType: "application/json", Body: body}
}

// marqetaNotification is one notification of a batch, as sent.
type marqetaNotification struct {
	category string
	index    int // within its category
	raw      []byte
}

// splitMarqeta splits an authentic body into one event per notification;
// ping reports a health check (pings and nothing else), which has none.
func splitMarqeta(body []byte) (events []Event, ping bool) {
	notifications, sawPings, err := readMarqetaBatch(body)
	if err != nil {
		return []Event{{ParseError: err}}, false
	}
	if len(notifications) == 0 {
		if sawPings {
			return nil, true
		}
		return []Event{{ParseError: errors.New("batch has no notifications")}}, false
	}
	events = make([]Event, len(notifications))
	for i, n := range notifications {
		events[i] = marqetaEvent(n)
	}
	return events, false
}

// readMarqetaBatch reads {"<category>":[{…},…],…} in body order, skipping
// pings. It fails for a body that is not such an object.
func readMarqetaBatch(body []byte) (notifications []marqetaNotification, sawPings bool, err error) {
	if err := checkJSONObject(body); err != nil {
		return nil, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the '{' checkJSONObject saw
		return nil, false, fmt.Errorf("body is not JSON: %w", err)
	}
	total := 0
	for dec.More() {
		start := dec.InputOffset()
		token, err := dec.Token()
		if err != nil {
			return nil, false, fmt.Errorf("body is not JSON: %w", err)
		}
		category, _ := token.(string)
		// The decoder replaces invalid UTF-8 with U+FFFD; the bytes tell.
		if storableKey(category) == "" || len(category) > marqetaMaxCategoryBytes ||
			!utf8.Valid(body[start:dec.InputOffset()]) {
			return nil, false, fmt.Errorf("category %q is not a usable name", category)
		}
		if token, err := dec.Token(); err != nil || token != json.Delim('[') {
			return nil, false, fmt.Errorf("category %q is not an array of notifications", category)
		}
		for index := 0; dec.More(); index++ {
			if total++; total > maxBatchItems {
				return nil, false, fmt.Errorf("batch has more than %d notifications", maxBatchItems)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, false, fmt.Errorf("body is not JSON: %w", err)
			}
			if category != marqetaPings {
				notifications = append(notifications, marqetaNotification{category: category, index: index, raw: raw})
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, false, fmt.Errorf("body is not JSON: %w", err)
		}
		sawPings = sawPings || category == marqetaPings
	}
	return notifications, sawPings, nil
}

// marqetaEvent builds a notification's event. The token is looked for even
// when the notification cannot be stored, so that its id stays stable.
func marqetaEvent(n marqetaNotification) Event {
	p := parsePayload(n.raw)
	members := p.members
	if members == nil {
		_ = json.Unmarshal(n.raw, &members) // lenient: only to find the token
	}
	return batchEvent(p, n.raw, n.category+":", payload{members: members}.str("token"), n.category, `"token"`,
		func() string { return fmt.Sprintf("notification %d of %q", n.index, n.category) })
}

// checkJSONObject returns nil when body is one JSON value and an object, and
// otherwise an error worded like parsePayload's. It does not decode.
func checkJSONObject(body []byte) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return errors.New("body is empty")
	}
	if !json.Valid(body) {
		var raw json.RawMessage
		return fmt.Errorf("body is not JSON: %w", json.Unmarshal(body, &raw))
	}
	switch trimmed[0] {
	case '{':
		return nil
	case '[':
		return errors.New("body is a JSON array, not an object")
	case '"':
		return errors.New("body is a JSON string, not an object")
	case 't', 'f':
		return errors.New("body is a JSON bool, not an object")
	case 'n':
		return errors.New("body is JSON null, not an object")
	}
	return errors.New("body is a JSON number, not an object")
}
