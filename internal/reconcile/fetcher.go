package reconcile

import (
	"context"
	"time"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// Fetcher lists a provider's recent events. It is the interface a provider's
// reconciliation implements.
type Fetcher interface {
	// Fetch calls page with the events the provider created at or after
	// since, a page at a time, until there are no more or page returns an
	// error (which Fetch returns). Each event carries its raw JSON as
	// Payload (or a ParseError) and is keyed like the provider's webhook
	// delivery of it.
	Fetch(ctx context.Context, since time.Time, page func(events []Fetched) error) error
}

// Fetched is one event a Fetcher listed.
type Fetched struct {
	// Event is the event as the inbox claims it.
	Event inboxstore.IncomingEvent
	// Raw is the event's JSON as the API returned it, stored as the row's
	// body.
	Raw []byte
}
