package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// DBTX is the pgx subset Enqueue needs: a handler's pgx.Tx, or a pool for a
// message that joins no transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Message is one message to deliver.
type Message struct {
	// Destination names a destination of the relay (config destinations).
	// Required.
	Destination string
	// Payload is the body delivered. Required (may be empty JSON "{}").
	Payload []byte
	// Headers are sent with the message (HTTP headers, NATS headers).
	Headers map[string]string
	// KeySuffix tells apart several messages of one event to one
	// destination; it must be stable across runs of the handler.
	KeySuffix string
	// Key, when set, is the whole key instead of the default
	// "<source>:<event_id>:<destination>[:<suffix>]", for a message that no
	// event caused. It must be as stable as the cause it stands for.
	Key string
}

// ErrNoKey is returned by Enqueue for a message with neither an event nor a
// Key.
var ErrNoKey = errors.New("outbox: a message needs an event or a Key")

// messageKey returns the key of m when ev caused it: m.Key when set, else
// "<source>:<event_id>:<destination>", followed by ":<suffix>" when
// m.KeySuffix is set.
func messageKey(ev *inbox.Event, m *Message) (string, error) {
	if m.Key != "" {
		return m.Key, nil
	}
	if ev == nil {
		return "", ErrNoKey
	}
	key := ev.Source + ":" + ev.EventID + ":" + m.Destination
	if m.KeySuffix != "" {
		key += ":" + m.KeySuffix
	}
	return key, nil
}

// Enqueue writes m to the outbox through tx, the handler's transaction, so
// that it is delivered when, and only when, tx commits. ev is the event the
// handler runs for (its source, id and type are recorded with the message
// and make the default key); it may be nil when m.Key is set. It reports
// false, and writes nothing, when a message with the same key is already
// there: the handler ran before for this event.
//
// The message is taken as a parameter rather than from ctx so that a
// handler's call says what it sends for which event, and works in tests and
// outside the worker alike.
func Enqueue(ctx context.Context, tx DBTX, ev *inbox.Event, m Message) (bool, error) {
	if m.Destination == "" {
		return false, errors.New("outbox: Message.Destination is required")
	}
	key, err := messageKey(ev, &m)
	if err != nil {
		return false, err
	}
	var source, eventID, eventType string
	if ev != nil {
		source, eventID, eventType = ev.Source, ev.EventID, ev.EventType
	}
	headers, err := json.Marshal(m.Headers)
	if err != nil {
		return false, fmt.Errorf("outbox: headers: %w", err)
	}
	if m.Headers == nil {
		headers = []byte("{}")
	}
	payload := m.Payload
	if payload == nil {
		payload = []byte{}
	}
	tag, err := tx.Exec(ctx, `
INSERT INTO hookinbox_outbox (key, destination, source, event_id, event_type, payload, headers)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key) DO NOTHING`, key, m.Destination, source, eventID, eventType, payload, headers)
	if err != nil {
		return false, fmt.Errorf("outbox: enqueue %q: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}
