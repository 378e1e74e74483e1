package inboxstore

import "github.com/hookinbox/hookinbox/pkg/inbox"

// The handler-facing vocabulary, defined in pkg/inbox.
type (
	// Status is inbox.Status.
	Status = inbox.Status
	// Event is inbox.Event.
	Event = inbox.Event
)

// The statuses of an inbox row (inbox.StatusPending and its siblings).
const (
	StatusPending = inbox.StatusPending
	StatusDone    = inbox.StatusDone
	StatusFailed  = inbox.StatusFailed
)

// ErrNotFound is inbox.ErrNotFound.
var ErrNotFound = inbox.ErrNotFound
