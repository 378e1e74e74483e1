package reconcile

import (
	"context"
	"time"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// Fetcher lists a provider's recent events. It is the interface a provider's
// reconciliation implements.
type Fetcher interface {
	// Fetch calls page with the events the provider created within
	// window, a page at a time, until there are no more or page returns an
	// error (which Fetch returns). Each event carries its raw JSON as
	// Payload (or a ParseError) and is keyed like the provider's webhook
	// delivery of it.
	Fetch(ctx context.Context, window Window, page func(events []Fetched) error) error
}

// Window is the time range a run lists: what the provider created (GitHub:
// first delivered) at or after Since and, unless Until is zero, at or
// before Until.
type Window struct {
	Since, Until time.Time
}

// after reports whether t is past the window's end.
func (w Window) after(t time.Time) bool { return !w.Until.IsZero() && t.After(w.Until) }

// Fetched is one event a Fetcher listed.
type Fetched struct {
	// Event is the event as the inbox claims it.
	Event inboxstore.IncomingEvent
	// Raw is the event's JSON as the API returned it, stored as the row's
	// body.
	Raw []byte
	// At is when the provider created the event.
	At time.Time
}
