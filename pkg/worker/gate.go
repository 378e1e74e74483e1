package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// isSnooze reports whether err asks River to snooze the job.
func isSnooze(err error) bool {
	var snooze *rivertype.JobSnoozeError
	return errors.As(err, &snooze)
}

// txOptions are the options of an event's own transaction: its isolation
// level and, with asyncCommit, synchronous_commit off (see
// inboxstore.WorkTxOptions), in one round trip.
func txOptions(asyncCommit bool, iso Isolation) pgx.TxOptions {
	opts := inboxstore.WorkTxOptions(asyncCommit)
	if opts.BeginQuery == "" {
		opts.IsoLevel = iso.txIsoLevel()
		return opts
	}
	opts.BeginQuery = fmt.Sprintf("BEGIN ISOLATION LEVEL %s; SET LOCAL synchronous_commit = off", iso.txIsoLevel())
	return opts
}

// isolationFor is the isolation level of the route's transactions.
func (w *eventWorker) isolationFor(route *compiledRoute) Isolation {
	if route != nil && route.route.Isolation != "" {
		return route.route.Isolation
	}
	return w.isolation
}

// sequenceFor is the sequence option of the route of source's eventType
// events, nil when it has none.
func (w *eventWorker) sequenceFor(source, eventType string) *SequenceOption {
	return w.router.sequenceOf(source, eventType)
}

// ownTransaction reports whether the job's events need a transaction of
// their own, outside any group.
func (w *eventWorker) ownTransaction(source, eventType string) bool {
	route, ok := w.router.matchRoute(source, eventType)
	return ok && (route.route.ownTransaction() || w.isolation != isolationDefault)
}

// inOwnTransaction runs fn in a transaction of the route's isolation level,
// and runs it again, after a short backoff, when it fails with a
// serialization failure (40001) or a deadlock (40P01), up to
// serializationRetriesDefault times (inboxstore.RetryConflicts, the one
// retry policy). Those runs roll back before the event's
// row is marked, so they spend none of its attempts.
func (w *eventWorker) inOwnTransaction(ctx context.Context, job *river.Job[inboxstore.JobArgs], fn func(pgx.Tx) error) error {
	route, _ := w.router.matchRoute(job.Args.Source, job.Args.EventType)
	opts := txOptions(w.asyncCommit, w.isolationFor(route))
	return inboxstore.RetryConflicts(ctx, serializationRetriesDefault+1, func() error { return w.inTx(ctx, opts, fn) },
		func(retry int, backoff time.Duration, err error) {
			w.logger.Debug("transaction conflict; running it again", zap.Int64("inbox_id", job.Args.InboxID),
				zap.Int("retry", retry), zap.Duration("backoff", backoff), zap.Error(err))
		})
}

// runGated runs ev's route in tx, behind the route's lock gate; a
// sequenced route's event comes with the position enterSequence let it
// through at, before its row was taken. A lock that cannot let the event
// through now returns a river.JobSnooze error: the transaction rolls back
// (the row's take with it), and River runs the job again later without
// counting an attempt.
func (w *eventWorker) runGated(ctx context.Context, tx pgx.Tx, ev *inbox.Event, gate *sequenceGate) error {
	route, ok := w.router.matchRoute(ev.Source, ev.EventType)
	if !ok {
		return w.runHandlers(ctx, tx, ev)
	}
	if lock := route.route.Lock; lock != nil {
		key, err := effect.Locate(lock.Key, ev)
		if err != nil {
			return inbox.Permanent(fmt.Errorf("lock key (%s): %w", lock.Key, err))
		}
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, advisoryKey(ev.Source, key)).Scan(&locked); err != nil {
			return fmt.Errorf("advisory lock: %w", err)
		}
		if !locked {
			w.logger.Debug("lock busy; event snoozed", zap.Int64("inbox_id", ev.ID), zap.String("lock_key", key))
			return river.JobSnooze(lock.Snooze)
		}
	}
	if route.route.Sequence != nil {
		return w.runSequenced(ctx, tx, ev, gate)
	}
	return w.runHandlers(ctx, tx, ev)
}
