package worker

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// Handler applies one event's business effect. It runs inside the event's
// transaction: everything it writes through tx commits together with the
// inbox row's done mark, or not at all.
//
// A returned error is retried with backoff; wrap it with inbox.Permanent to
// fail the event at once. tx's Commit and Rollback return an error: the
// transaction is not the handler's to end (it may be shared by a group of
// events, each behind a savepoint of its own). A handler should not make
// calls outside the database that cannot be repeated (use an outbox for
// those).
type Handler func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error

// Registry maps handler names, as routes name them in the config, to
// handlers. It is filled before the worker starts and read-only after.
type Registry struct {
	handlers map[string]Handler
}

// NewRegistry returns a registry holding the built-in handlers: "noop",
// which does nothing, "log", which logs the event's identity (never its
// payload) through logger, and "mirror", which keeps the latest snapshot of
// every object in hookinbox_snapshot (see mirrorHandler), and "forward",
// which enqueues the event to its route's destinations through the outbox
// (see forwardHandler).
func NewRegistry(logger *zap.Logger) *Registry {
	r := &Registry{handlers: map[string]Handler{}}
	r.Register("noop", func(context.Context, pgx.Tx, inbox.Event) error { return nil })
	r.Register("log", func(_ context.Context, _ pgx.Tx, ev inbox.Event) error {
		logger.Info("event", zap.Int64("inbox_id", ev.ID), zap.String("source", ev.Source),
			zap.String("event_id", ev.EventID), zap.String("event_type", ev.EventType),
			zap.String("request_id", ev.RequestID), zap.Int("attempts", ev.Attempts))
		return nil
	})
	r.Register(MirrorHandlerName, mirrorHandler(logger))
	r.Register(ForwardHandlerName, forwardHandler)
	return r
}

// Register adds or replaces a named handler.
func (r *Registry) Register(name string, h Handler) {
	r.handlers[name] = h
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.handlers))
	for n := range r.handlers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (r *Registry) lookup(name string) (Handler, error) {
	h, ok := r.handlers[name]
	if !ok {
		return nil, fmt.Errorf("unknown handler %q (registered: %v)", name, r.Names())
	}
	return h, nil
}
