package worker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/effect"
)

// Isolation is a handler transaction's isolation level.
type Isolation string

// The isolation levels a route or the worker may choose.
const (
	IsolationReadCommitted  Isolation = "read_committed"
	IsolationRepeatableRead Isolation = "repeatable_read"
	IsolationSerializable   Isolation = "serializable"
	// isolationDefault is the level of a route and a worker that choose none.
	isolationDefault = IsolationReadCommitted
)

// ParseIsolation parses an isolation level's name; "" is isolationDefault.
func ParseIsolation(s string) (Isolation, error) {
	switch Isolation(s) {
	case "":
		return isolationDefault, nil
	case IsolationReadCommitted, IsolationRepeatableRead, IsolationSerializable:
		return Isolation(s), nil
	}
	return "", fmt.Errorf("unknown isolation %q (want %s, %s or %s)", s, IsolationReadCommitted, IsolationRepeatableRead, IsolationSerializable)
}

func (i Isolation) txIsoLevel() pgx.TxIsoLevel {
	switch i {
	case IsolationRepeatableRead:
		return pgx.RepeatableRead
	case IsolationSerializable:
		return pgx.Serializable
	}
	return pgx.ReadCommitted
}

// The defaults of the route options.
const (
	// LockSnoozeDefault is LockOption.Snooze's default.
	LockSnoozeDefault = time.Second
	// SequencePoisonAfterDefault is SequenceOption.PoisonAfter's default.
	SequencePoisonAfterDefault = 3
	// serializationRetriesDefault is how many times a handler transaction
	// that failed with SQLSTATE 40001 or 40P01 is run again at once, with
	// a short backoff, before the failure counts as an attempt.
	serializationRetriesDefault = 10
)

// LockOption runs a route's handlers under a transaction-scoped advisory
// lock, pg_try_advisory_xact_lock, whose 64-bit key is the first 8 bytes of
// SHA-256 of the event's source and the key located in it. An event whose
// lock is busy is snoozed (river.JobSnooze): it does not run, and the try
// counts as no attempt. The lock is released by the transaction's end,
// commit or rollback, so it is safe behind PgBouncer's transaction pooling,
// which never carries session state across transactions.
type LockOption struct {
	// Key locates the lock key in the event (pkg/effect's locator grammar:
	// "data.object.customer", "header:X-Shopify-Shop-Domain"). Required.
	Key string `mapstructure:"key"`
	// Snooze is how long a busy event waits before it tries again.
	// Defaults to 1s (LockSnoozeDefault).
	Snooze time.Duration `mapstructure:"snooze"`
}

// SequenceOption processes a route's events that share a sequence key one
// at a time, in the order of their version or event time; events of
// different keys still run in parallel on every worker. See docs/design.md,
// "Per-object sequencing", for the guarantees and their cost.
type SequenceOption struct {
	// Key locates the sequence key: a JSON path or "header:Name", several
	// joined by "|". Required.
	Key string `mapstructure:"key"`
	// Order locates the order within a key: an integer version or an
	// RFC 3339 time. Defaults to the route's mirror version, else the
	// provider's documented version (pkg/effect.DefaultSpec).
	Order string `mapstructure:"order"`
	// HoldBack holds each event back until it is this old (from the inbox's
	// received_at), so that an older event arriving within the window is
	// still processed first. 0 (the default) processes at once; an event
	// that arrives after a newer one of its key was processed is then
	// processed as soon as it can be, and reported late: never dropped,
	// never reordered silently.
	HoldBack time.Duration `mapstructure:"hold_back"`
	// PoisonAfter: a pending event of the key that has failed this many
	// attempts no longer holds back the events after it (it is retried on
	// its own schedule and reported late when it succeeds). In a Route
	// built in code, 0 holds them until it is done or failed for good;
	// from the worker: section, 0 (left out) defaults to 3
	// (SequencePoisonAfterDefault), and worker.max_attempts holds the key
	// until the event is failed for good.
	PoisonAfter int `mapstructure:"poison_after"`
}

// validate checks the option and fills in its order from spec.
func (s *SequenceOption) validate(spec *effect.Spec) error {
	if err := inboxstore.CheckSequenceLocator(s.Key); err != nil {
		return fmt.Errorf("sequence.key: %w", err)
	}
	if s.Order == "" && spec != nil {
		s.Order = spec.Version
	}
	if s.Order == "" {
		return errors.New("sequence.order: required when the route has no mirror spec")
	}
	if err := inboxstore.CheckSequenceLocator(s.Order); err != nil {
		return fmt.Errorf("sequence.order: %w", err)
	}
	return nil
}

// advisoryKey is the first 8 bytes of SHA-256 over the parts, each ended by
// a NUL: 64 bits, where hashtext would give 32 and collide 65,536 times
// more often.
func advisoryKey(parts ...string) int64 {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

type routeKey struct{}

// withRoute records in ctx the route an event's handlers run for.
func withRoute(ctx context.Context, r *Route) context.Context {
	return context.WithValue(ctx, routeKey{}, r)
}

// RouteFrom returns the route whose handlers are running, from a handler's
// context; false outside one.
func RouteFrom(ctx context.Context) (*Route, bool) {
	r, ok := ctx.Value(routeKey{}).(*Route)
	return r, ok
}

// Sequenced is what a sequenced route's handler learns about its event.
type Sequenced struct {
	// Key is the event's sequence key.
	Key string
	// Order is the event's order within its key, as a decimal number.
	Order string
	// Late is true when an event of the key with a greater order was
	// processed before this one.
	Late bool
}

type sequencedKey struct{}

// SequencedFrom returns the sequencing of the running event, from a
// handler's context; false when its route is not sequenced.
func SequencedFrom(ctx context.Context) (Sequenced, bool) {
	s, ok := ctx.Value(sequencedKey{}).(Sequenced)
	return s, ok
}

// checkRouteOptions checks what Config.Validate leaves to run time in a
// route's options (a mirror spec's and a sequence's locators, a lock's key)
// and returns a copy with their defaults filled in.
func checkRouteOptions(r Route) (*Route, error) {
	out := r
	if m := out.Mirror; m != nil && m.Kind == "" && m.ID == "" && m.Version == "" {
		// A mirror section that locates nothing (a route over every source
		// that sets only its tie, say) takes the provider's defaults, as a
		// route without one does.
		out.Mirror = nil
	}
	if out.Mirror != nil {
		m := *out.Mirror
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
		out.Mirror = &m
	}
	if out.Lock != nil {
		l := *out.Lock
		if l.Key == "" {
			return nil, errors.New("lock.key: required")
		}
		if l.Snooze <= 0 {
			l.Snooze = LockSnoozeDefault
		}
		out.Lock = &l
	}
	if out.Sequence != nil {
		s := *out.Sequence
		if err := s.validate(out.Mirror); err != nil {
			return nil, err
		}
		out.Sequence = &s
	}
	return &out, nil
}

// ownTransaction reports whether the route's events need a transaction of
// their own (never a group's): an isolation level, a lock or a sequence.
func (r *Route) ownTransaction() bool {
	return r.Isolation != "" || r.Lock != nil || r.Sequence != nil
}
