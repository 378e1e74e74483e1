package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// errParked is what process returns, after its transaction committed, for
// an event parked behind its sequence key: its job ends, and the run of
// its key that comes before it wakes it with a new job.
var errParked = errors.New("event parked behind its sequence key")

// sequenceInlineBudget is how long a job that ran an event of a key goes
// on running the key's next events itself, each woken in the transaction
// of the one before (see eventWorker.runInline). Past it, the woken
// event's own job takes over the key.
const sequenceInlineBudget = time.Second

// sequenceGate is what a sequenced event's run knows of its key: the
// position enterSequence let it through at, and the event its run woke.
type sequenceGate struct {
	pos   *inboxstore.SequencePosition
	woken *inboxstore.ClaimedRow
}

// query is the option's inboxstore.SequenceQuery.
func (s *SequenceOption) query() *inboxstore.SequenceQuery {
	return &inboxstore.SequenceQuery{Key: s.Key, Order: s.Order, PoisonAfter: s.PoisonAfter}
}

// sequenceLock is the advisory lock key of a sequence key.
func sequenceLock(source, key string) int64 {
	return advisoryKey("hookinbox.sequence", source, key)
}

// enterSequence decides, before the event's row is taken, whether the
// event of row id runs now. In tx, it:
//
//  1. locates the event's key and order;
//  2. takes the key's transaction-scoped advisory lock, waiting for the
//     key's running event, if any, to commit. Every run, park and wake of
//     the key holds it, so what the next steps read cannot change under
//     them. The lock ends with the transaction, a killed worker's with its
//     connection: a key is never held by a dead process;
//  3. counts, once, the key's pending events ordered before it (by order,
//     then received_at, then inbox id), except those that failed
//     PoisonAfter attempts. While there are any, it parks the event
//     (inboxstore.Store.ParkSequenceTx) and returns errParked: the
//     transaction commits the park alone, and the job ends. The key's run
//     that comes before it wakes it (wakeSequence);
//  4. holds the first event back, snoozing its job, until it is HoldBack
//     old.
//
// It returns the event's position when it is to run; ErrNotFound when its
// row is done, erased or gone.
func (w *eventWorker) enterSequence(ctx context.Context, tx pgx.Tx, id int64, seq *SequenceOption) (*inboxstore.SequencePosition, error) {
	q := seq.query()
	pos, err := w.store.LocateSequence(ctx, tx, id, q)
	if errors.Is(err, inboxstore.ErrNoSequencePosition) {
		return nil, inbox.Permanent(err)
	}
	if err != nil {
		return nil, err
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT clock_timestamp() FROM (SELECT pg_advisory_xact_lock($1)) AS l`,
		sequenceLock(pos.Source, pos.Key)).Scan(&now); err != nil {
		return nil, fmt.Errorf("sequence lock: %w", err)
	}
	if err := w.store.CountSequenceAhead(ctx, tx, pos, q); err != nil {
		return nil, err
	}
	if pos.Ahead > 0 {
		if err := w.store.ParkSequenceTx(ctx, tx, pos); err != nil {
			return nil, err
		}
		return pos, errParked
	}
	if wait := pos.ReceivedAt.Add(seq.HoldBack).Sub(now); seq.HoldBack > 0 && wait > 0 {
		return nil, river.JobSnooze(wait)
	}
	return pos, nil
}

// runSequenced runs a sequenced route's handlers for ev in tx, once
// enterSequence let it through at pos. It tells the handlers
// (SequencedFrom) whether ev is late, that is, whether an event of the key
// ordered after it was processed already; a late event gets a note on its
// inbox row. It records ev's position as the key's latest, if it is. After
// the handlers, it wakes the key's next parked event, in tx.
func (w *eventWorker) runSequenced(ctx context.Context, tx pgx.Tx, ev *inbox.Event, route *compiledRoute, gate *sequenceGate) error {
	if gate == nil || gate.pos == nil {
		return errors.New("sequence: the event ran without its position")
	}
	pos := gate.pos
	late, latest, err := advanceSequence(ctx, tx, ev.Source, pos)
	if err != nil {
		return err
	}
	if late {
		w.logger.Warn("late event: an event of its sequence key ordered after it was processed first",
			zap.Int64("inbox_id", ev.ID), zap.String("sequence_key", pos.Key), zap.String("order", pos.Order),
			zap.String("latest_order", latest))
		if err := w.store.SetNote(ctx, tx, ev.ID, fmt.Sprintf("late: sequence key %q had reached order %s before this event's %s", pos.Key, latest, pos.Order)); err != nil {
			return err
		}
	}
	seqCtx := context.WithValue(ctx, sequencedKey{}, Sequenced{Key: pos.Key, Order: pos.Order, Late: late})
	if err := w.runHandlers(seqCtx, tx, ev, route); err != nil {
		return err
	}
	gate.woken, err = w.wakeSequence(ctx, tx, pos, ev.ID)
	return err
}

// wakeSequence wakes the lowest parked event of pos's key, in tx, which
// holds the key's lock: a new job for it, and a notification that makes a
// worker fetch it as soon as tx commits. self is the running event, whose
// own park, if any, is removed (0 for none).
func (w *eventWorker) wakeSequence(ctx context.Context, tx pgx.Tx, pos *inboxstore.SequencePosition, self int64) (*inboxstore.ClaimedRow, error) {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return nil, fmt.Errorf("sequence: wake: %w", err)
	}
	woken, err := w.store.WakeSequenceTx(ctx, tx, &inboxstore.WakeParams{
		Source: pos.Source, Key: pos.Key, Self: self, Client: client, QueueFor: w.queueFor,
	})
	if err != nil || woken == nil {
		return nil, err
	}
	// River's own notification of the insert may have been dropped by its
	// per-queue rate limit: a woken event must never wait for a poll.
	return woken, w.store.NotifyInsertTx(ctx, tx, client.Schema(), w.queueFor(pos.Source))
}

// runInline runs, in run's Work, the events its key's runs wake, one after
// another, for sequenceInlineBudget from the run's start: the next event of a key
// runs as soon as the one before commits, with no fetch between them. Each
// woken event has its own job all the same (inserted by the wake, so that a
// crash here loses nothing): that job finds it done and does nothing, or,
// should the inline run not end with it done (it failed, parked or was held
// back), works it as usual, counting its attempts. An inline run's failure
// is therefore not recorded here.
func (w *eventWorker) runInline(ctx context.Context, run *eventRun, next *inboxstore.ClaimedRow) {
	budget := sequenceInlineBudget
	if deadline, ok := ctx.Deadline(); ok {
		// Half the job's time at most: the job must end well inside it.
		budget = min(budget, deadline.Sub(run.start)/2)
	}
	until := run.start.Add(budget)
	for next != nil && time.Now().Before(until) && ctx.Err() == nil {
		inline := *run.job
		inline.Args = inboxstore.JobArgs{InboxID: next.ID, Source: next.Source, EventID: next.EventID, EventType: next.EventType, RequestID: next.RequestID}
		// The woken event's own run, its route resolved once.
		woken := w.newRun(&inline, run.start)
		if woken.sequence == nil || (w.pauses != nil && w.pauses.isPaused(next.Source)) {
			return
		}
		// The metrics count the event when its own job finds it done.
		out := w.process(ctx, woken)
		if next = out.woken; out.err != nil || out.held {
			w.logger.Debug("inline run of a woken event stopped; its own job works it", zap.Int64("inbox_id", inline.Args.InboxID), zap.Error(out.err))
			return
		}
	}
}

// sequenceError is a sequenced event's failure: recording it also wakes
// the key's next parked event (recordSequenceFailure).
type sequenceError struct {
	pos *inboxstore.SequencePosition
	err error
}

func (f *sequenceError) Error() string { return f.err.Error() }
func (f *sequenceError) Unwrap() error { return f.err }

// recordSequenceFailure records a sequenced event's failure (as
// Store.RecordFailure) and, in the same transaction, under its key's lock,
// wakes the key's next parked event. The failure may be what lets it run:
// the event failed for good, or has now failed PoisonAfter attempts. If not,
// the woken event parks again.
func (w *eventWorker) recordSequenceFailure(ctx context.Context, f *sequenceError, jobID int64, final bool) error {
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, sequenceLock(f.pos.Source, f.pos.Key)); err != nil {
			return fmt.Errorf("sequence lock: %w", err)
		}
		if err := w.store.RecordFailure(ctx, tx, f.pos.ID, jobID, f.err.Error(), final, time.Time{}); err != nil {
			return err
		}
		_, err := w.wakeSequence(ctx, tx, f.pos, 0)
		return err
	})
}

// advanceSequence records pos as its key's latest position unless a later
// one is recorded, in which case the event is late: it returns whether it
// is, and the key's latest order. hookinbox_sequence is owned here.
func advanceSequence(ctx context.Context, tx pgx.Tx, source string, pos *inboxstore.SequencePosition) (late bool, latest string, err error) {
	err = tx.QueryRow(ctx, `
WITH prior AS (
    SELECT ord, received_at, inbox_id FROM hookinbox_sequence WHERE source = $1 AND seq_key = $2
), written AS (
    INSERT INTO hookinbox_sequence AS cur (source, seq_key, ord, received_at, inbox_id)
    VALUES ($1, $2, $3::numeric, $4, $5)
    ON CONFLICT (source, seq_key) DO UPDATE
    SET ord = EXCLUDED.ord, received_at = EXCLUDED.received_at, inbox_id = EXCLUDED.inbox_id, updated_at = now()
    WHERE (cur.ord, cur.received_at, cur.inbox_id) < (EXCLUDED.ord, EXCLUDED.received_at, EXCLUDED.inbox_id)
    RETURNING 1
)
SELECT coalesce((SELECT (ord, received_at, inbox_id) > ($3::numeric, $4, $5) FROM prior), false),
       coalesce((SELECT ord::text FROM prior), '')
FROM (SELECT count(*) FROM written) AS w`, source, pos.Key, pos.Order, pos.ReceivedAt, pos.ID).Scan(&late, &latest)
	if err != nil {
		return false, "", fmt.Errorf("sequence: advance: %w", err)
	}
	return late, latest, nil
}
