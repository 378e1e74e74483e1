package inboxstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// The River priorities of event jobs. River fetches a queue's jobs by
// priority first (1 before 4), then in order. The worker's own jobs (the
// reaper, the prune, a bulk replay's run, reconciliation) keep River's
// default, 1, so that a backlog of events never holds back the jobs that
// heal it: at 1, the events' priority until this version, a reaper waited
// behind a storm's backlog, and the stale locks, orphans and jobs on a
// dead queue it heals waited as long as the storm.
const (
	// EventPriority is a live event's job's, and one replayed by id.
	EventPriority = 2
	// ReplayPriority is a bulk-replayed event's job's: it waits behind
	// live traffic instead of starving it.
	ReplayPriority = 4
)

// ErrNotReplayable is returned by ReplayEventTx for a row that is pending
// (its job is still to run) or erased (nothing left to run it on).
var ErrNotReplayable = errors.New("inbox: only a done or failed row that still has its payload can be replayed")

// replayable is the condition a row must meet to be replayed: settled, and
// not erased.
const replayable = `i.status IN ('done', 'failed') AND i.erased_at IS NULL`

// ReplayTx replays up to limit rows that sel selects, of id above afterID,
// in id order, in the caller's transaction: each row goes back to pending
// and gets a new River job (at ReplayPriority, on the queue queueFor names
// for its source), linked as its current job. No row is inserted: the row
// keeps its id, keys, attempts and attempt history, and the worker takes it
// again because it is no longer done. Pending and erased rows are skipped.
//
// It returns the replayed rows in id order; fewer than limit does not
// mean that none are left (a row changed while it was locked is skipped),
// an empty result does. The rows stay locked until tx ends, so a worker
// cannot take one before its job is committed.
func (s *Store) ReplayTx(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], sel *Selection, afterID int64, limit int,
	queueFor func(string) string,
) ([]ClaimedRow, error) {
	args := append(sel.args(), afterID, limit)
	rows, err := tx.Query(ctx, `
WITH picked AS (
    SELECT i.id FROM webhook_inbox AS i
    WHERE i.id > $8 AND `+replayable+` AND `+selectionWhere+`
    ORDER BY i.id
    LIMIT $9
    FOR UPDATE
)
UPDATE webhook_inbox AS i SET status = 'pending', processed_at = NULL, note = NULL
FROM picked
WHERE i.id = picked.id AND `+replayable+`
RETURNING i.id, i.source, i.event_id, i.status, i.event_type, coalesce(i.request_id, '')`, args...)
	if err != nil {
		return nil, fmt.Errorf("inbox: replay: %w", err)
	}
	replayed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ClaimedRow])
	if err != nil {
		return nil, fmt.Errorf("inbox: replay: %w", err)
	}
	// RETURNING follows the update's order, not necessarily the ids'.
	sortByID(replayed)
	if err := s.enqueueTx(ctx, tx, client, replayed, queueFor, ReplayPriority, nil); err != nil {
		return nil, err
	}
	return replayed, nil
}

// ReplayEventTx replays source's event eventID (see ReplayTx), in the
// caller's transaction. It returns ErrNotFound when there is no such row,
// and ErrNotReplayable when it is pending or erased. One event is the
// operator's own request, so its job gets a live event's priority.
func (s *Store) ReplayEventTx(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], source, eventID string,
	queueFor func(string) string,
) (*ClaimedRow, error) {
	var row ClaimedRow
	var ok bool
	err := tx.QueryRow(ctx, `
WITH found AS (
    SELECT i.id, `+replayable+` AS ok FROM webhook_inbox AS i WHERE i.source = $1 AND i.event_id = $2 FOR UPDATE
), replayed AS (
    UPDATE webhook_inbox AS i SET status = 'pending', processed_at = NULL, note = NULL
    FROM found WHERE i.id = found.id AND found.ok
    RETURNING i.id
)
SELECT i.id, i.source, i.event_id, 'pending', i.event_type, coalesce(i.request_id, ''), found.ok
FROM found JOIN webhook_inbox AS i ON i.id = found.id`, planned, source, eventID).
		Scan(&row.ID, &row.Source, &row.EventID, &row.Status, &row.EventType, &row.RequestID, &ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("inbox: replay event: %w", err)
	}
	if !ok {
		return nil, ErrNotReplayable
	}
	if err := s.enqueueTx(ctx, tx, client, []ClaimedRow{row}, queueFor, EventPriority, nil); err != nil {
		return nil, err
	}
	return &row, nil
}

// CountReplayable counts the rows of sel that a replay would touch: done
// or failed, not erased. A bulk replay's dry run and its progress total.
func (s *Store) CountReplayable(ctx context.Context, sel *Selection) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox AS i WHERE `+replayable+` AND `+selectionWhere,
		sel.args()...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: count replayable: %w", err)
	}
	return n, nil
}

func sortByID(rows []ClaimedRow) {
	slices.SortFunc(rows, func(a, b ClaimedRow) int { return cmp.Compare(a.ID, b.ID) })
}
