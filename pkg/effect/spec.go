package effect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// Spec says where an event's object kind, id, version and event time come
// from. Each field is a locator, several of which may be joined with "|"
// (the first that yields a value wins):
//
//   - a dotted JSON path into the payload, "data.object.id"; a "*" step
//     takes the only key of an object ("data.object.*.version" reads
//     Square's data.object.payment.version);
//   - "header:Name", a delivery header kept in the inbox (case-insensitive);
//   - "type_prefix", the event type up to its first "." or "/"
//     ("orders/updated" → "orders");
//   - "=text", the literal text.
//
// Numbers are read as integers (a revision counter, or Unix seconds for an
// event time); strings as integers when they are, else as RFC 3339 times
// (a version then becomes Unix microseconds).
type Spec struct {
	// Kind locates the object's kind. Required; in a route's mirror
	// section, empty takes the provider's default (DefaultSpec).
	Kind string `mapstructure:"kind"`
	// ID locates the object's id. Required; in a route's mirror section,
	// empty takes the provider's default.
	ID string `mapstructure:"id"`
	// Version locates the object's version: a revision counter or a time.
	// Required; in a route's mirror section, empty takes the provider's
	// default.
	Version string `mapstructure:"version"`
	// EventTime locates the provider's event time, the first tie-breaker.
	// Optional: without it the inbox's received_at stands in.
	EventTime string `mapstructure:"event_time"`
	// Tie is the rule for tied versions: arrival (the default: the later
	// event time, then the later delivery wins) or keep_first.
	Tie Tie `mapstructure:"tie"`
}

// The documented defaults, by provider.
var defaultSpecs = map[string]Spec{
	// A Stripe event: {"created": 1700000000, "data": {"object": {"object": "customer", "id": "cus_1"}}}.
	// created has one-second resolution: ties are common, and the tie rule
	// breaks them by arrival.
	"stripe": {Kind: "data.object.object", ID: "data.object.id", Version: "created", EventTime: "created"},
	// A Shopify resource: {"id": 450789469, "updated_at": "2024-01-01T10:00:00-05:00"}; the
	// topic ("orders/updated") names the kind.
	"shopify": {Kind: "type_prefix", ID: "id", Version: "updated_at|header:X-Shopify-Triggered-At",
		EventTime: "header:X-Shopify-Triggered-At|updated_at"},
	// A Square event: {"created_at": …, "data": {"type": "payment", "id": …, "object": {"payment": {"version": 3}}}}.
	"square": {Kind: "data.type", ID: "data.id", Version: "data.object.*.version|data.object.*.updated_at", EventTime: "created_at"},
	// A Paddle event: {"event_type": "subscription.updated", "occurred_at": …, "data": {"id": "sub_1"}}.
	"paddle": {Kind: "type_prefix", ID: "data.id", Version: "occurred_at", EventTime: "occurred_at"},
}

// DefaultSpec returns the documented Spec for provider, and false when there
// is none (a route then needs its own).
func DefaultSpec(provider string) (Spec, bool) {
	s, ok := defaultSpecs[provider]
	return s, ok
}

// ErrNotLocated is returned when a locator finds nothing in an event.
var ErrNotLocated = errors.New("effect: not found in the event")

// Validate checks that the required locators are set.
func (s *Spec) Validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{{"kind", s.Kind}, {"id", s.ID}, {"version", s.Version}} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, fmt.Errorf("%s: a locator is required", f.name))
		}
	}
	if _, err := ParseTie(string(s.Tie)); err != nil {
		errs = append(errs, fmt.Errorf("tie: %w", err))
	}
	return errors.Join(errs...)
}

// Snapshot reads the event's snapshot as s locates it.
func (s *Spec) Snapshot(ev *inbox.Event) (*Snapshot, error) {
	doc, err := decode(ev.Payload)
	if err != nil {
		return nil, err
	}
	kind, err := locateString(s.Kind, doc, ev)
	if err != nil {
		return nil, fmt.Errorf("kind (%s): %w", s.Kind, err)
	}
	id, err := locateString(s.ID, doc, ev)
	if err != nil {
		return nil, fmt.Errorf("id (%s): %w", s.ID, err)
	}
	version, err := locateVersion(s.Version, doc, ev)
	if err != nil {
		return nil, fmt.Errorf("version (%s): %w", s.Version, err)
	}
	snap := &Snapshot{Source: ev.Source, Kind: kind, ObjectID: id, Version: version, ReceivedAt: ev.ReceivedAt,
		InboxID: ev.ID, EventID: ev.EventID, Payload: ev.Payload}
	if s.EventTime != "" {
		if snap.EventTime, err = locateTime(s.EventTime, doc, ev); err != nil && !errors.Is(err, ErrNotLocated) {
			return nil, fmt.Errorf("event time (%s): %w", s.EventTime, err)
		}
	}
	return snap, nil
}

// Locate returns what locator finds in ev, as text.
func Locate(locator string, ev *inbox.Event) (string, error) {
	doc, err := decode(ev.Payload)
	if err != nil {
		return "", err
	}
	return locateString(locator, doc, ev)
}

// locateTime returns what locator finds in ev, whose decoded payload is doc,
// as a time: a number is Unix seconds, a string an RFC 3339 time.
func locateTime(locator string, doc any, ev *inbox.Event) (time.Time, error) {
	v, err := locate(locator, doc, ev)
	if err != nil {
		return time.Time{}, err
	}
	switch v := v.(type) {
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return time.Time{}, fmt.Errorf("effect: %q is not whole Unix seconds", v)
		}
		return time.Unix(n, 0).UTC(), nil
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.Unix(n, 0).UTC(), nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("effect: %q is neither Unix seconds nor an RFC 3339 time", v)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("effect: a time must be a number or a string, not %T", v)
}

func locateString(locator string, doc any, ev *inbox.Event) (string, error) {
	v, err := locate(locator, doc, ev)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("effect: want a string or a number, found %T", v)
}

func locateVersion(locator string, doc any, ev *inbox.Event) (int64, error) {
	v, err := locate(locator, doc, ev)
	if err != nil {
		return 0, err
	}
	var s string
	switch v := v.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = v
	default:
		return 0, fmt.Errorf("effect: a version must be a number or a string, not %T", v)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("effect: version %q is neither an integer nor an RFC 3339 time", s)
	}
	return t.UnixMicro(), nil
}

// locate tries each of the "|"-joined locators in turn.
func locate(locators string, doc any, ev *inbox.Event) (any, error) {
	for _, loc := range strings.Split(locators, "|") {
		if v, ok := locateOne(strings.TrimSpace(loc), doc, ev); ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNotLocated, locators)
}

func locateOne(loc string, doc any, ev *inbox.Event) (any, bool) {
	switch {
	case loc == "":
		return nil, false
	case strings.HasPrefix(loc, "="):
		return loc[1:], true
	case loc == "type_prefix":
		if i := strings.IndexAny(ev.EventType, "./"); i > 0 {
			return ev.EventType[:i], true
		}
		return ev.EventType, ev.EventType != ""
	case strings.HasPrefix(loc, "header:"):
		name := loc[len("header:"):]
		for k, v := range ev.Headers {
			if strings.EqualFold(k, name) && v != "" {
				return v, true
			}
		}
		return nil, false
	}
	return walk(doc, strings.Split(loc, "."))
}

// walk follows a dotted path; numbers stay json.Number so that large ids
// and versions keep every digit.
func walk(doc any, path []string) (any, bool) {
	cur := doc
	for _, step := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if step == "*" {
			if len(m) != 1 {
				return nil, false
			}
			for _, v := range m {
				cur = v
			}
			continue
		}
		if cur, ok = m[step]; !ok {
			return nil, false
		}
	}
	if cur == nil {
		return nil, false
	}
	return cur, true
}

// decode parses a payload, numbers as json.Number; nil for no payload.
func decode(payload json.RawMessage) (any, error) {
	if len(payload) == 0 {
		return nil, nil //nolint:nilnil // no payload is no document, and no error: every locator then finds nothing
	}
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("effect: payload: %w", err)
	}
	return doc, nil
}
