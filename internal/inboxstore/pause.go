package inboxstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// This file holds the statements on hookinbox_source_pause and the row
// transitions of a paused source: Hold (a worker leaves an event pending,
// detached from its job) and Resume (the source's held events get jobs
// again).
//
// Why held events are detached rather than snoozed: a snoozed job is
// rewritten every snooze interval for as long as the pause lasts (a write per
// held event per interval, for hours), and drains only when its next snooze
// ends. A detached event costs one job run, is never counted as an attempt,
// and is enqueued at once by Resume; nothing polls it meanwhile.

// NoteHeld is the note on an event a worker held because its source was
// paused.
const NoteHeld = "held: source paused"

// ErrNotPaused is returned by Resume for a source that is not paused.
var ErrNotPaused = errors.New("inbox: source is not paused")

// ResumeBatchDefault is how many held events Resume enqueues per
// transaction.
const ResumeBatchDefault = 1000

// PausedSource is a row of hookinbox_source_pause.
type PausedSource struct {
	Source   string    `json:"source"`
	PausedAt time.Time `json:"paused_at"`
	PausedBy string    `json:"paused_by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// Pause records source as paused, and reports whether it was not paused
// already (a second pause keeps the first one's time and reason). Workers
// see it within their pause refresh interval (worker.pause_refresh). It
// commits durably (DurableTxOptions): the admin API answers 2xx after it.
func (s *Store) Pause(ctx context.Context, source, by, reason string) (bool, error) {
	var paused bool
	err := BeginDurableFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
INSERT INTO hookinbox_source_pause (source, paused_by, reason) VALUES ($1, $2, $3)
ON CONFLICT (source) DO NOTHING`, source, by, reason)
		paused = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("inbox: pause %s: %w", source, err)
	}
	return paused, nil
}

// PausedSources returns the paused sources, by name.
func (s *Store) PausedSources(ctx context.Context) ([]PausedSource, error) {
	rows, err := s.pool.Query(ctx, `SELECT source, paused_at, paused_by, reason FROM hookinbox_source_pause ORDER BY source`)
	if err != nil {
		return nil, fmt.Errorf("inbox: paused sources: %w", err)
	}
	paused, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PausedSource])
	if err != nil {
		return nil, fmt.Errorf("inbox: paused sources: %w", err)
	}
	return paused, nil
}

// Hold leaves the event of row id pending, marked held (held_at) and with
// NoteHeld, when its source is paused, and reports whether it did, on db
// (the pool, or the transaction the event was to be worked in). It is a
// worker's step for a source it believes paused, before the event's
// handlers begin: false (the source was resumed meanwhile, or the row is
// done) means work the event as usual.
//
// The pause row is read FOR SHARE, so a concurrent Resume (which deletes it)
// waits for this statement's transaction: either Hold sees the pause gone,
// or Resume, running after it, finds the detached row and enqueues it. A
// held event is never lost between the two. A failed row that is being
// retried is held as pending, so that Resume enqueues it too. An erased row
// (purged) is never touched: it stays failed, with nothing left to run, so
// neither Resume nor the reaper can enqueue it again.
func (s *Store) Hold(ctx context.Context, db DBTX, id int64, source string) (bool, error) {
	tag, err := db.Exec(ctx, `
WITH paused AS (SELECT source FROM hookinbox_source_pause WHERE source = $2 FOR SHARE)
UPDATE webhook_inbox SET status = 'pending', held_at = now(), note = $3, processed_at = NULL
WHERE id = $1 AND source = $2 AND status <> 'done' AND erased_at IS NULL AND EXISTS (SELECT 1 FROM paused)`, planned, id, source, NoteHeld)
	if err != nil {
		return false, fmt.Errorf("inbox: hold event %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CountHeld counts the events of source held while it is or was paused.
func (s *Store) CountHeld(ctx context.Context, source string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FROM webhook_inbox WHERE source = $1 AND status = 'pending' AND held_at IS NOT NULL`, source).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: count held: %w", err)
	}
	return n, nil
}

// ResumeParams configure Resume.
type ResumeParams struct {
	// Source is the source to resume. Required.
	Source string
	// Client inserts the held events' jobs; it may be insert-only.
	Client *river.Client[pgx.Tx]
	// QueueFor names a source's queue. Required.
	QueueFor func(source string) string
	// Batch is how many held events one transaction enqueues. Defaults to
	// ResumeBatchDefault.
	Batch int
}

// Resume deletes source's pause and enqueues a job for each of its held
// events (pending rows marked held_at), the first batch in the transaction
// that deletes the pause, the rest in batches of their own. It returns the
// number of events enqueued, and ErrNotPaused when source was not paused.
// Should it stop half-way (a crash), the reaper enqueues the rest once
// they are worker.orphan_after old, since the source is no longer paused.
// Each transaction commits durably (DurableTxOptions): the admin API
// answers 2xx after Resume.
func (s *Store) Resume(ctx context.Context, params *ResumeParams) (int, error) {
	batch := params.Batch
	if batch <= 0 {
		batch = ResumeBatchDefault
	}
	total := 0
	for first := true; ; first = false {
		n := 0
		err := BeginDurableFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if first {
				tag, err := tx.Exec(ctx, `DELETE FROM hookinbox_source_pause WHERE source = $1`, params.Source)
				if err != nil {
					return fmt.Errorf("inbox: resume %s: %w", params.Source, err)
				}
				if tag.RowsAffected() == 0 {
					return ErrNotPaused
				}
			}
			rows, err := tx.Query(ctx, `
SELECT id, source, event_id, status, event_type, coalesce(request_id, '') FROM webhook_inbox
WHERE source = $1 AND status = 'pending' AND held_at IS NOT NULL AND erased_at IS NULL
ORDER BY id LIMIT $2 FOR UPDATE`, planned, params.Source, batch)
			if err != nil {
				return fmt.Errorf("inbox: resume %s: %w", params.Source, err)
			}
			held, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ClaimedRow])
			if err != nil {
				return fmt.Errorf("inbox: resume %s: %w", params.Source, err)
			}
			n = len(held)
			if n == 0 {
				return nil
			}
			if _, err := tx.Exec(ctx, `UPDATE webhook_inbox SET held_at = NULL, note = CASE WHEN note = $2 THEN NULL ELSE note END WHERE id = ANY($1)`,
				planned, ids(held), NoteHeld); err != nil {
				return fmt.Errorf("inbox: resume %s: %w", params.Source, err)
			}
			return s.EnqueueTx(ctx, tx, params.Client, held, params.QueueFor)
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

func ids(rows []ClaimedRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}
