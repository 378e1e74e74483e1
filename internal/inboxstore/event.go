// Package inboxstore is hookinbox's deduplicating event inbox in PostgreSQL: the
// webhook_inbox table, the claim that lets each event in exactly once, and
// the row transitions (done, failed, re-enqueued) that workers and the reaper
// make.
//
// It is the table's only owner. Every rule about what may enter it (the key
// policy: fallback ids, failed-on-arrival reasons, see Delivery) is applied
// here to whatever a producer hands in, and every statement on it runs
// through a Store: store.go holds those of the receiver, the workers and the
// CLI. The handler-facing vocabulary (Event, Status, ErrNotFound) is
// pkg/inbox, aliased here.
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
