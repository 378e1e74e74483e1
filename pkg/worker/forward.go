package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// ForwardHandlerName is the name of the built-in forward handler.
const ForwardHandlerName = "forward"

// The headers the forward handler sends with each message.
const (
	HeaderSource    = "X-Hookinbox-Source"
	HeaderEventID   = "X-Hookinbox-Event-Id"
	HeaderEventType = "X-Hookinbox-Event-Type"
)

// noteFiltered is recorded on an event its route's filter skipped.
const noteFiltered = "the route's filter did not match; marked done without running a handler"

// Condition is one test of a route's filter on an event.
type Condition struct {
	// Path locates a value in the event (pkg/effect's locator grammar: a
	// dotted JSON path such as "data.object.currency", or "header:Name").
	// Required.
	Path string `mapstructure:"path"`
	// In lists the accepted values, compared as text (a number as written
	// in the payload, true or false). Empty: the value only has to be
	// present (and not null).
	In []string `mapstructure:"in"`
}

// matches reports whether ev satisfies every condition.
func matchesFilter(conds []Condition, ev *inbox.Event) (bool, error) {
	for _, c := range conds {
		v, err := effect.Locate(c.Path, ev)
		if errors.Is(err, effect.ErrNotLocated) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("filter %s: %w", c.Path, err)
		}
		if len(c.In) > 0 && !slices.Contains(c.In, v) {
			return false, nil
		}
	}
	return true, nil
}

// forwardHandler enqueues the event, in its transaction, to each of its
// route's Destinations through the outbox (pkg/outbox): its JSON payload
// (the raw body when it had none) with its source, id and type in headers,
// keyed "<source>:<event_id>:<destination>", so that a replayed event
// queues nothing twice. The relay then delivers it.
func forwardHandler(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
	route, ok := RouteFrom(ctx)
	if !ok || len(route.Destinations) == 0 {
		return inbox.Permanent(errors.New("forward: the route has no destinations"))
	}
	payload := []byte(ev.Payload)
	if payload == nil {
		payload = ev.Body
	}
	headers := map[string]string{HeaderSource: ev.Source, HeaderEventID: ev.EventID, HeaderEventType: ev.EventType}
	for _, dest := range route.Destinations {
		if _, err := outbox.Enqueue(ctx, tx, &ev, outbox.Message{Destination: dest, Payload: payload, Headers: headers}); err != nil {
			return err
		}
	}
	return nil
}
