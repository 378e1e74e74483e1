// Package inbox is hookinbox's deduplicating event inbox in PostgreSQL: the
// webhook_inbox table, the claim that lets each event in exactly once, and
// the row transitions (done, failed, re-enqueued) that workers and the reaper
// make.
//
// It is the table's only owner. Every rule about what may enter it (the key
// policy: fallback ids, failed-on-arrival reasons, see Delivery) is applied
// here to whatever a producer hands in, and every statement on it runs
// through a Store: store.go holds those of the receiver, the workers and the
// CLI, bulk.go those of benchmarks and demos.
package inbox

import (
	"encoding/json"
	"errors"
	"time"
)

// Status is a row's processing state, enforced by a CHECK constraint.
type Status string

// The statuses of an inbox row.
const (
	// StatusPending rows wait for their River job.
	StatusPending Status = "pending"
	// StatusDone rows were processed; their effect is committed.
	StatusDone Status = "done"
	// StatusFailed rows are poison (attempts exhausted), permanently failed,
	// or were unparseable on arrival. last_error says why.
	StatusFailed Status = "failed"
)

// Event is an inbox row as handlers see it.
type Event struct {
	// ID is the row's identity.
	ID int64
	// Source is the configured source name ("stripe").
	Source string
	// Provider is the source's delivery contract ("stripe").
	Provider string
	// EventID is the provider's deduplication key, unique per source.
	EventID string
	// EventType is the provider's event type.
	EventType string
	// Payload is the event's JSON; nil for an unparseable delivery.
	Payload json.RawMessage
	// Body is the raw request body the signature covered.
	Body []byte
	// Headers are the delivery's audit headers.
	Headers map[string]string
	// Status is the row's status when it was locked.
	Status Status
	// Attempts counts earlier handler runs.
	Attempts int
	// LastError is the previous run's error, if any.
	LastError string
	// ReceivedAt is when the receiver committed the row.
	ReceivedAt time.Time
	// RequestID is the X-Request-Id of the delivery that brought the event
	// in; "" when none was recorded.
	RequestID string
}

// ErrNotFound is returned when an inbox row does not exist (it was pruned).
var ErrNotFound = errors.New("inbox: event not found")

// PermanentError marks a handler error that retrying cannot fix.
type PermanentError struct{ Err error }

// Error implements error.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that the worker fails its event at once instead of
// retrying it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
