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

// Snoozes of a sequenced event that waits for its key: one step per event
// ahead of it, within bounds, so that a long queue of one key does not
// spin while its head runs.
const (
	sequenceSnoozeStep = 20 * time.Millisecond
	sequenceSnoozeMax  = 2 * time.Second
	// sequenceBusySnooze is the wait of an event whose key another
	// transaction holds.
	sequenceBusySnooze = 20 * time.Millisecond
)

// runSequenced runs a sequenced route's handlers for ev in tx when ev is the
// next of its key, and snoozes it otherwise:
//
//  1. it takes the key's transaction-scoped advisory lock, without waiting:
//     held, the key's previous event is still running, so ev is snoozed.
//     The lock ends with the transaction, a killed worker's with its
//     connection: a key is never held by a dead process;
//  2. it holds ev back until it is HoldBack old;
//  3. it counts the key's pending events ordered before ev (by order, then
//     received_at, then inbox id), except those that failed PoisonAfter
//     attempts: while there are any, ev is snoozed, and the first of them
//     runs first;
//  4. it runs the handlers, telling them (SequencedFrom) whether ev is late,
//     that is, whether an event of the key ordered after it was processed
//     already; a late event gets a note on its inbox row. It then records
//     ev's position as the key's latest, if it is.
func (w *eventWorker) runSequenced(ctx context.Context, tx pgx.Tx, ev *inbox.Event, seq *SequenceOption) error {
	pos, err := w.store.SequencePosition(ctx, tx, ev.ID, &inboxstore.SequenceQuery{Key: seq.Key, Order: seq.Order, PoisonAfter: seq.PoisonAfter})
	if errors.Is(err, inboxstore.ErrNoSequencePosition) {
		return inbox.Permanent(err)
	}
	if err != nil {
		return err
	}
	var (
		locked bool
		now    time.Time
	)
	err = tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1), clock_timestamp()`,
		advisoryKey("hookinbox.sequence", ev.Source, pos.Key)).Scan(&locked, &now)
	if err != nil {
		return fmt.Errorf("sequence lock: %w", err)
	}
	if !locked {
		return river.JobSnooze(sequenceBusySnooze)
	}
	if wait := ev.ReceivedAt.Add(seq.HoldBack).Sub(now); seq.HoldBack > 0 && wait > 0 {
		return river.JobSnooze(wait)
	}
	if pos.Ahead > 0 {
		// Counted before the lock was ours: count again, now that the key's
		// previous event, if one was running, has committed.
		if pos, err = w.store.SequencePosition(ctx, tx, ev.ID, &inboxstore.SequenceQuery{Key: seq.Key, Order: seq.Order, PoisonAfter: seq.PoisonAfter}); err != nil {
			return err
		}
		if pos.Ahead > 0 {
			return river.JobSnooze(min(sequenceSnoozeMax, time.Duration(pos.Ahead)*sequenceSnoozeStep))
		}
	}
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
	ctx = context.WithValue(ctx, sequencedKey{}, Sequenced{Key: pos.Key, Order: pos.Order, Late: late})
	return w.runHandlers(ctx, tx, ev)
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
