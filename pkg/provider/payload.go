package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// This file holds what every provider does once a signature matched: decide
// whether the authentic body can be stored in a jsonb column, and build the
// Event that says so, with an id and a type PostgreSQL can store.

// Limits of what an authentic delivery makes the receiver store.
const (
	// maxKeyBytes bounds an event id or type. The unique index on the event
	// id holds btree entries of at most about 2.7 KB: a longer id would make
	// every claim of its delivery fail, and the provider retry it forever.
	maxKeyBytes = 1024
	// maxBatchItems bounds the items of one batched delivery; Marqeta sends
	// up to 10 and Adyen one. A larger batch is not split at all, so that a
	// hostile body cannot make the receiver build a million rows.
	maxBatchItems = 1000
)

// unstorableKey says why storableKey refuses a key.
var unstorableKey = fmt.Sprintf("is not valid UTF-8, has a NUL or is longer than %d bytes", maxKeyBytes)

// storableKey returns s when it can be stored as an event id or type, and ""
// otherwise: PostgreSQL's text refuses a NUL and invalid UTF-8, and an id
// must stay under maxKeyBytes.
func storableKey(s string) string {
	if len(s) > maxKeyBytes || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return ""
	}
	return s
}

// itemID returns the event id of one item of a batch. It is prefix+key, and
// keyed is true, when key is set and the whole is a storable key. Otherwise
// it is prefix+"sha256:"+<hex SHA-256 of raw>, which a resend of the item
// repeats, so that it still deduplicates. So it is too when raw is not valid
// UTF-8 and key has a U+FFFD, which encoding/json puts in place of invalid
// bytes: two different keys could then meet in one id.
func itemID(prefix, key string, raw []byte) (id string, keyed bool) {
	replaced := strings.ContainsRune(key, utf8.RuneError) && !utf8.Valid(raw)
	if key != "" && storableKey(prefix+key) != "" && !replaced {
		return prefix + key, true
	}
	sum := sha256.Sum256(raw)
	return prefix + "sha256:" + hex.EncodeToString(sum[:]), false
}

// batchEvent builds the event of one item of an authentic batch, parsed as
// p from raw: its id is prefix+key, or a hash of the item when key is
// unusable (see itemID); a ParseError names the item with where() and, for
// a missing id, the members it was looked for in (keyNames).
func batchEvent(p payload, raw []byte, prefix, key, typ, keyNames string, where func() string) Event {
	id, keyed := itemID(prefix, key, raw)
	event := Event{ID: id, Type: typ}
	switch {
	case p.err != nil:
		event.ParseError = fmt.Errorf("%s: %w", where(), p.err)
	case !keyed:
		event.ParseError = fmt.Errorf("no event id: %s has no usable %s", where(), keyNames)
	default:
		event.Payload = raw
	}
	return event
}

// payload is an authentic body parsed as a JSON object.
type payload struct {
	// members are the object's top-level members; nil when err is set.
	members map[string]json.RawMessage
	// err says why the body cannot be stored as a jsonb object.
	err error
}

// parsePayload checks that body can be stored in a PostgreSQL jsonb column
// as a JSON object and returns its top-level members.
func parsePayload(body []byte) payload {
	if len(bytes.TrimSpace(body)) == 0 {
		return payload{err: errors.New("body is empty")}
	}
	// encoding/json would silently replace invalid UTF-8 with U+FFFD, which
	// PostgreSQL does not: it refuses the whole document.
	if !utf8.Valid(body) {
		return payload{err: errors.New("body is not valid UTF-8")}
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return payload{err: fmt.Errorf("body is a JSON %s, not an object", typeErr.Value)}
		}
		return payload{err: fmt.Errorf("body is not JSON: %w", err)}
	}
	if members == nil { // the body is null
		return payload{err: errors.New("body is JSON null, not an object")}
	}
	if err := checkJSONBEscapes(body); err != nil {
		return payload{err: err}
	}
	return payload{members: members}
}

// str returns the top-level member name when it is a JSON string, else "".
func (p payload) str(name string) string {
	return p.path(name)
}

// path returns the string at a path of nested object members ("data",
// "object", "id"), or "" when any step is missing or not of that kind.
func (p payload) path(names ...string) string {
	var value string
	if json.Unmarshal(p.lookup(names...), &value) != nil {
		return ""
	}
	return value
}

// scalar returns the string, or the number as its JSON text, at a path of
// nested object members; "" when a step is missing or the value is of
// another kind.
func (p payload) scalar(names ...string) string {
	raw := p.lookup(names...)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// lookup returns the value at a path of nested object members, or nil when
// any step is missing or not an object.
func (p payload) lookup(names ...string) json.RawMessage {
	if p.members == nil || len(names) == 0 {
		return nil
	}
	raw := p.members[names[0]]
	for _, name := range names[1:] {
		var object map[string]json.RawMessage
		if raw == nil || json.Unmarshal(raw, &object) != nil {
			return nil
		}
		raw = object[name]
	}
	return raw
}

// event builds the single event of an authentic delivery from its id and
// type, wherever the scheme carries them. idSource says where the id was
// looked for, for the ParseError of a delivery without one. An id or type
// that cannot be stored (see storableKey) counts as none.
func (p payload) event(body []byte, id, typ, idSource string) Event {
	storableID, typ := storableKey(id), storableKey(typ)
	switch {
	case p.err != nil:
		return Event{ID: storableID, Type: typ, ParseError: p.err}
	case id == "":
		return Event{Type: typ, ParseError: fmt.Errorf("no event id: %s is missing or empty", idSource)}
	case storableID == "":
		return Event{Type: typ, ParseError: fmt.Errorf("no event id: %s %s", idSource, unstorableKey)}
	}
	return Event{ID: id, Type: typ, Payload: body}
}

// newDelivery returns the delivery of one event, keeping the named headers
// for audit and re-verification.
func newDelivery(event Event, header http.Header, keep ...string) *Delivery {
	return &Delivery{Events: []Event{event}, Headers: auditHeaders(header, keep...)}
}

// checkJSONBEscapes returns an error for the first string escape that
// PostgreSQL's jsonb refuses: \u0000, and a UTF-16 surrogate that is not half
// of a high-low pair. Keys are strings too and are checked alike. body must
// be valid JSON, so raw control bytes (a literal NUL) cannot occur in it.
func checkJSONBEscapes(body []byte) error {
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			i++
			if body[i] != 'u' {
				continue // \" \\ \/ \b \f \n \r \t
			}
			r := hex4(body[i+1 : i+5])
			i += 4
			switch {
			case r == 0:
				return errors.New(`body has \u0000 in a JSON string, which jsonb cannot store`)
			case r >= 0xDC00 && r <= 0xDFFF:
				return errors.New("body has a lone UTF-16 low surrogate escape, which jsonb cannot store")
			case r >= 0xD800 && r <= 0xDBFF:
				next := body[i+1:]
				if len(next) < 6 || next[0] != '\\' || next[1] != 'u' ||
					hex4(next[2:6]) < 0xDC00 || hex4(next[2:6]) > 0xDFFF {
					return errors.New("body has a lone UTF-16 high surrogate escape, which jsonb cannot store")
				}
				i += 6
			}
		}
	}
	return nil
}

// hex4 decodes the four hex digits of a \u escape of valid JSON.
func hex4(digits []byte) rune {
	var r rune
	for _, c := range digits {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// auditHeaders returns the named headers that are present, keyed by their
// canonical names.
func auditHeaders(header http.Header, names ...string) map[string]string {
	kept := make(map[string]string, len(names))
	for _, name := range names {
		if value := header.Get(name); value != "" {
			kept[http.CanonicalHeaderKey(name)] = value
		}
	}
	return kept
}
