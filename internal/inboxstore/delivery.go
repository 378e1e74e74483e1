package inboxstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// Delivery is one authentic delivery to claim, as its provider described
// it. It is what every producer hands the inbox (the receiver maps a
// verified request to it; a benchmark or a test builds one directly), and
// the inbox alone decides what of it may enter webhook_inbox:
//
//   - An event without a usable id (none, or one PostgreSQL could not
//     index: empty, longer than 1 kB, not UTF-8, with a NUL) is recorded as
//     failed and keyed by the body's SHA-256, "sha256:<hex>", with ":<i>"
//     appended for the i-th event of a batch (i > 0), so that resends still
//     deduplicate.
//   - An event with a ParseError is recorded as failed with the reason
//     "unparseable delivery: <error>"; one whose id alone is unusable with
//     "unusable event id: it <why>". A failed event's payload is not stored
//     and no job is enqueued for it.
//   - A twin key that could not be indexed is dropped, and the event type is
//     cleaned to fit a text column (invalid UTF-8 and NUL replaced, cut to
//     1 kB).
type Delivery struct {
	// Source is the configured source name ("stripe").
	Source string
	// Provider is the source's delivery contract ("stripe"), stored with
	// each row.
	Provider string
	// Body is the raw request body the signature covered; each event's row
	// keeps it for audit and re-verification.
	Body []byte
	// Headers are the delivery's audit headers, with canonical names.
	Headers map[string]string
	// Events are the delivery's events; a non-batching provider has one.
	Events []IncomingEvent
	// RequestID is the delivery's X-Request-Id, stored on each of its rows
	// and carried by their jobs. Optional.
	RequestID string
	// TraceContext is the W3C trace context ("traceparent", "tracestate")
	// of the span that received the delivery. It is written into the
	// metadata of each job the delivery enqueues, so that the worker's
	// spans link to it, whatever group transaction commits the delivery.
	// Optional: nil when tracing is off.
	TraceContext map[string]string
}

// IncomingEvent is one event of a Delivery, as its provider described it.
type IncomingEvent struct {
	// ID is the provider's deduplication key, unique per source. Empty when
	// the provider found none; the inbox then derives one (see Delivery).
	ID string
	// Type is the provider's event type ("payment_intent.succeeded").
	Type string
	// Payload is the event's JSON document. It is not stored when the event
	// is recorded as failed.
	Payload []byte
	// TwinKey, when set, is a second, logical identity of the event, unique
	// per source like ID: an event whose twin key is taken is skipped like a
	// duplicate.
	TwinKey string
	// ParseError, when set, says why the authentic event cannot be stored
	// as JSON; the event is recorded as failed with it, never dropped.
	ParseError error
}

// newEvent is one row to claim: an IncomingEvent after the key policy.
type newEvent struct {
	Source    string
	Provider  string
	EventID   string
	EventType string
	// Payload is the event's JSON, or nil when FailReason is set.
	Payload []byte
	Body    []byte
	Headers map[string]string
	// FailReason, when set, records the event as failed on arrival. No job
	// is enqueued for it.
	FailReason string
	// TwinKey, when set, is a second identity of the event, unique per
	// source.
	TwinKey string
	// RequestID is the delivery's X-Request-Id, or "".
	RequestID string
	// JobMetadata is the metadata of the event's job (the delivery's
	// TraceContext as a JSON object), or nil.
	JobMetadata []byte
}

// events applies the inbox's key policy (see Delivery) to the delivery's
// events and returns the rows to claim, in order.
func (d *Delivery) events() []newEvent {
	events := make([]newEvent, len(d.Events))
	var bodyKey string
	var metadata []byte
	if len(d.TraceContext) > 0 {
		metadata, _ = json.Marshal(d.TraceContext) // A map of strings always encodes.
	}
	for i, in := range d.Events {
		ev := newEvent{
			Source: d.Source, Provider: d.Provider, EventID: in.ID, EventType: cleanText(in.Type),
			Payload: in.Payload, Body: d.Body, Headers: d.Headers, TwinKey: in.TwinKey, RequestID: cleanText(d.RequestID),
			JobMetadata: metadata,
		}
		if in.ParseError != nil {
			ev.FailReason = "unparseable delivery: " + in.ParseError.Error()
			ev.Payload = nil
		}
		if ev.EventID != "" {
			if err := checkKey(ev.EventID); err != nil {
				ev.EventID = ""
				if ev.FailReason == "" {
					ev.FailReason = "unusable event id: it " + err.Error()
					ev.Payload = nil
				}
			}
		}
		if ev.EventID == "" {
			if bodyKey == "" {
				sum := sha256.Sum256(d.Body)
				bodyKey = "sha256:" + hex.EncodeToString(sum[:])
			}
			ev.EventID = bodyKey
			if i > 0 {
				ev.EventID += ":" + strconv.Itoa(i)
			}
		}
		if ev.TwinKey != "" && checkKey(ev.TwinKey) != nil {
			ev.TwinKey = ""
		}
		events[i] = ev
	}
	return events
}

// deliveryEvents applies the key policy to each delivery and returns all
// their rows, in order.
func deliveryEvents(deliveries []*Delivery) []newEvent {
	if len(deliveries) == 1 {
		return deliveries[0].events()
	}
	var all []newEvent
	for _, d := range deliveries {
		all = append(all, d.events()...)
	}
	return all
}
