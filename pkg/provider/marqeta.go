package provider

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// marqetaSignatureHeader carries Marqeta's optional hex HMAC of the body.
const marqetaSignatureHeader = "X-Marqeta-Signature"

// marqetaPings is the category of Marqeta's health checks.
const marqetaPings = "pings"

// Limits of batched deliveries (Marqeta, Adyen).
const (
	// maxBatchItems bounds the notifications of one delivery; Marqeta sends
	// up to 10 and Adyen one. A larger batch is not split at all, so that a
	// hostile body cannot make the receiver build a million rows.
	maxBatchItems = 1000
	// maxKeyBytes bounds each part of an event id (a category, a token, an
	// eventCode, a pspReference), far below what a btree index entry holds.
	maxKeyBytes = 200
)

func init() {
	register("marqeta", adapt(NewMarqeta), Preset{})
	registerSigner("marqeta", func(p *SignParams) (http.Header, error) {
		header, err := basicAuthHeader("marqeta", p.Config)
		if err != nil || p.Secret == "" {
			return header, err
		}
		algorithm := ""
		if p.Config != nil {
			algorithm = p.Config.Algorithm
		}
		signature, err := SignMarqeta(algorithm, p.Secret, p.Body)
		if err != nil {
			return nil, err
		}
		header.Set(marqetaSignatureHeader, signature)
		return header, nil
	})
}

// Marqeta verifies Marqeta webhook deliveries. Two checks, both of which
// must pass:
//
//   - HTTP Basic Auth, always: Marqeta requires it of every webhook, so a
//     source without Config.BasicAuth is a configuration error.
//   - X-Marqeta-Signature, when Config.Secrets is set: the lowercase hex
//     HMAC of the raw body (HMAC-SHA256, or HMAC-SHA1 with Config.Algorithm
//     "sha1") under any configured secret. Without secrets the header is not
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
//     when the token is usable, else "<category>:sha256:<hex of its bytes>",
//     so that a resend still deduplicates;
//   - a body that is not a batch (not JSON, not an object of arrays, no
//     notification, a category name that is not a short UTF-8 string without
//     NUL, more than 1000 notifications) is one Event with a ParseError and no
//     ID, which the receiver keys by the body's SHA-256.
//
// Marqeta treats any status other than exactly 200 as a failure, so Marqeta
// implements Acknowledger with 200.
type Marqeta struct {
	basicAuth []BasicAuth
	secrets   [][]byte
	newHash   func() hash.Hash
}

// NewMarqeta returns a Marqeta verifier. Config.BasicAuth is required;
// Config.Secrets and Config.Algorithm ("sha256", the default, or "sha1")
// configure the optional HMAC. Config.Tolerance and Config.Now are not used.
func NewMarqeta(config *Config) (*Marqeta, error) {
	if err := config.validate(); err != nil {
		return nil, fmt.Errorf("marqeta: %w", err)
	}
	if len(config.BasicAuth) == 0 {
		return nil, errors.New("marqeta: basic_auth: Marqeta requires Basic Auth; configure at least one username and password")
	}
	newHash, err := marqetaHash(config.Algorithm)
	if err != nil {
		return nil, fmt.Errorf("marqeta: %w", err)
	}
	secrets := make([][]byte, len(config.Secrets))
	for i, secret := range config.Secrets {
		secrets[i] = []byte(secret)
	}
	return &Marqeta{basicAuth: config.BasicAuth, secrets: secrets, newHash: newHash}, nil
}

// marqetaHash returns the hash of a Config.Algorithm value.
func marqetaHash(algorithm string) (func() hash.Hash, error) {
	switch algorithm {
	case "", "sha256":
		return sha256.New, nil
	case "sha1":
		return sha1.New, nil
	}
	return nil, fmt.Errorf("algorithm: %q is not sha1 or sha256", algorithm)
}

// Verify implements Verifier.
func (m *Marqeta) Verify(body []byte, header http.Header) (*Delivery, error) {
	if err := checkBasicAuth(header, m.basicAuth); err != nil {
		return nil, fmt.Errorf("marqeta: %w", err)
	}
	if err := m.checkSignature(body, header.Get(marqetaSignatureHeader)); err != nil {
		return nil, fmt.Errorf("marqeta: %w", err)
	}
	events, ping := splitMarqeta(body)
	delivery := &Delivery{Events: events, Headers: auditHeaders(header, marqetaSignatureHeader)}
	if ping {
		delivery.Reply = &Reply{Status: http.StatusOK}
	}
	return delivery, nil
}

// checkSignature checks X-Marqeta-Signature when secrets are configured. The
// header is compared as the encoded string, so only the lowercase hex that
// Marqeta sends is accepted.
func (m *Marqeta) checkSignature(body []byte, signature string) error {
	if len(m.secrets) == 0 {
		return nil
	}
	if signature == "" {
		return fmt.Errorf("no %s header: %w", marqetaSignatureHeader, ErrSignatureMissing)
	}
	matched := false
	for _, secret := range m.secrets {
		mac := hmac.New(m.newHash, secret)
		mac.Write(body)
		expected := hex.EncodeToString(mac.Sum(nil))
		matched = hmac.Equal([]byte(signature), []byte(expected)) || matched
	}
	if !matched {
		return fmt.Errorf("%s matches no configured secret: %w", marqetaSignatureHeader, ErrSignatureInvalid)
	}
	return nil
}

// Ack implements Acknowledger: Marqeta counts anything but exactly 200 as a
// failed delivery and sends it again.
func (m *Marqeta) Ack(counts Counts) Reply {
	body := `{"new":` + strconv.Itoa(counts.New) + `,"duplicates":` + strconv.Itoa(counts.Duplicates) +
		`,"twins":` + strconv.Itoa(counts.Twins) + `}`
	return Reply{Status: http.StatusOK, ContentType: "application/json", Body: []byte(body)}
}

// SignMarqeta returns the X-Marqeta-Signature header value Marqeta would
// send for body signed with secret: the lowercase hex HMAC under algorithm
// ("sha256" or "" for HMAC-SHA256, "sha1" for HMAC-SHA1). Marqeta also
// requires Basic Auth, which SignHeaders adds from SignParams.Config. It is
// for demos, load generators and tests.
func SignMarqeta(algorithm, secret string, body []byte) (string, error) {
	newHash, err := marqetaHash(algorithm)
	if err != nil {
		return "", fmt.Errorf("marqeta: %w", err)
	}
	mac := hmac.New(newHash, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil)), nil
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
		if !usableKey(category) || !utf8.Valid(body[start:dec.InputOffset()]) {
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
	token := payload{members: members}.str("token")
	event := Event{ID: n.category + ":" + token, Type: n.category}
	if !usableKey(token) {
		event.ID = hashedID(n.category+":", n.raw)
	}
	switch {
	case p.err != nil:
		event.ParseError = fmt.Errorf("notification %d of %q: %w", n.index, n.category, p.err)
	case !usableKey(token):
		event.ParseError = fmt.Errorf(`no event id: notification %d of %q has no usable "token"`, n.index, n.category)
	default:
		event.Payload = n.raw
	}
	return event
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

// usableKey reports whether s can be (part of) an event id or type: not
// empty, short, UTF-8 and free of NUL, which PostgreSQL's text refuses.
func usableKey(s string) bool {
	return s != "" && len(s) <= maxKeyBytes && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// hashedID is the id of a batch item without a usable key of its own:
// prefix, then "sha256:" and the hex SHA-256 of the item's bytes, which a
// resend of the item repeats.
func hashedID(prefix string, raw []byte) string {
	sum := sha256.Sum256(raw)
	return prefix + "sha256:" + hex.EncodeToString(sum[:])
}

// basicAuthHeader returns a header carrying the first Basic Auth pair of
// config, for the signers of providers that require Basic Auth.
func basicAuthHeader(provider string, config *Config) (http.Header, error) {
	if config == nil || len(config.BasicAuth) == 0 {
		return nil, fmt.Errorf("%s: signing needs SignParams.Config.BasicAuth", provider)
	}
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(config.BasicAuth[0].Username, config.BasicAuth[0].Password)
	return req.Header, nil
}
