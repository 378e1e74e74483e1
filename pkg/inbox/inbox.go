// Package inbox is the vocabulary a handler author needs from hookinbox's
// deduplicating inbox: the Event a handler receives, the row's Status, the
// Permanent wrapper that fails an event without retries, and the ClaimCounts
// a delivery's claim committed, which a provider's Acknowledger answers with.
// It imports nothing but the standard library; the inbox table's statements
// live in internal/inboxstore.
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

// ClaimCounts is what the inbox committed for one delivery. Its JSON form is the
// receiver's 200 body: {"new":…,"duplicates":…,"twins":…}.
type ClaimCounts struct {
	// New counts the events claimed: rows inserted, jobs enqueued.
	New int `json:"new"`
	// Duplicates counts the events skipped because their (source, event id)
	// was taken.
	Duplicates int `json:"duplicates"`
	// Twins counts the events skipped because only their twin key was
	// taken: a second logical copy of an event under a new id.
	Twins int `json:"twins"`
}
