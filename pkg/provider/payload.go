package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// This file holds what every provider does once a signature matched: decide
// whether the authentic body can be stored in a jsonb column, and build the
// Event that says so.

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
	var value string
	if err := json.Unmarshal(p.members[name], &value); err != nil {
		return ""
	}
	return value
}

// path returns the string at a path of nested object members ("data",
// "object", "id"), or "" when any step is missing or not of that kind.
func (p payload) path(names ...string) string {
	if p.members == nil || len(names) == 0 {
		return ""
	}
	raw, ok := p.members[names[0]]
	for _, name := range names[1:] {
		var obj map[string]json.RawMessage
		if !ok || json.Unmarshal(raw, &obj) != nil {
			return ""
		}
		raw, ok = obj[name]
	}
	var value string
	if !ok || json.Unmarshal(raw, &value) != nil {
		return ""
	}
	return value
}

// event builds the single event of an authentic delivery from its id and
// type, wherever the scheme carries them. idSource says where the id was
// looked for, for the ParseError of a delivery without one.
func (p payload) event(body []byte, id, typ, idSource string) Event {
	switch {
	case p.err != nil:
		return Event{ID: id, Type: typ, ParseError: p.err}
	case id == "":
		return Event{Type: typ, ParseError: fmt.Errorf("no event id: %s is missing or empty", idSource)}
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
