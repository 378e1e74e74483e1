package outbox

import (
	"context"
	"fmt"
	"time"
)

// Destination delivers outbox messages somewhere outside PostgreSQL. It is
// where users plug in their own: Deliver returns nil once the destination
// acknowledged the message (a 2xx, a JetStream publish ack), and may be
// called again with the same record after a crash, so it must send r.Key
// for the consumer to drop duplicates by.
//
// An error is retried with backoff, unless it is a *RetryAfterError (retried
// no sooner than its After), a *DisableError (the destination is disabled
// until an operator enables it) or a *PermanentError (the message fails at
// once).
type Destination interface {
	Deliver(ctx context.Context, r *Record) error
}

// RetryAfterError asks for the next attempt no sooner than After (an HTTP
// Retry-After).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

// Error implements error.
func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// DisableError disables the destination (an HTTP 410 Gone): its messages
// stay pending until `inboxctl outbox enable`.
type DisableError struct{ Err error }

// Error implements error.
func (e *DisableError) Error() string { return "destination gone: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *DisableError) Unwrap() error { return e.Err }

// PermanentError fails the message at once: retrying cannot help (a 4xx
// other than 408, 409, 425 and 429).
type PermanentError struct{ Err error }

// Error implements error.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }
