package inboxstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds the statements that bound the inbox's size and the life
// of the personal data in it: pruning done rows past their source's
// retention, erasing payloads past payload_retention, and purging chosen
// rows on request. Failed rows are never pruned: they are the dead letters.

// Every cutoff here is computed by the database: a statement takes an age
// (an interval) and compares received_at with now() minus it. received_at
// is the database's clock, so a worker whose clock runs ahead cannot shorten
// a retention, which must outlive the provider's redelivery window.

// PruneBatch deletes up to limit done rows of source received more than
// retention ago (by the database's clock), oldest first, in a transaction
// of its own, and returns how many it deleted. Rows another transaction
// holds (a replay taking them) are skipped, never waited for. The statement
// takes the table's ROW EXCLUSIVE lock, which the receiver's INSERT also
// takes and which conflicts with neither, and row locks on the rows it
// deletes only; a small limit keeps those short.
func (s *Store) PruneBatch(ctx context.Context, source string, retention time.Duration, limit int) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
WITH doomed AS (
    SELECT id FROM webhook_inbox
    WHERE source = $1 AND status = 'done' AND received_at < now() - $2::interval
    ORDER BY received_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM webhook_inbox AS i USING doomed WHERE i.id = doomed.id AND i.status = 'done' RETURNING i.id
), `+dropDeliveries("deleted")+`
SELECT count(*) FROM deleted`, source, retention, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: prune %s: %w", source, err)
	}
	return n, nil
}

// eraseLegacy empties the bytes a row received before migration 0011 keeps
// in the row itself; dropDeliveries is the CTE that deletes the deliveries
// of the rows whose ids the CTE rows returns.
const eraseLegacy = `legacy_body = NULL, legacy_headers = NULL, legacy_payload = NULL`

func dropDeliveries(rows string) string {
	return fmt.Sprintf(`dropped AS (DELETE FROM webhook_inbox_delivery AS d USING %[1]s WHERE d.inbox_id = %[1]s.id)`, rows)
}

// CountPrunable counts the done rows of source received more than
// retention ago: what pruning would delete.
func (s *Store) CountPrunable(ctx context.Context, source string, retention time.Duration) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FROM webhook_inbox WHERE source = $1 AND status = 'done' AND received_at < now() - $2::interval`,
		source, retention).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: count prunable %s: %w", source, err)
	}
	return n, nil
}

// ErasePayloadsBatch erases the body, headers and payload of up to limit
// done rows of source received more than payloadRetention ago (by the
// database's clock) but not more than retention ago, oldest first, in a
// transaction of its own, and returns how many it erased. The rows keep
// their keys, so that a late redelivery is still a duplicate. retention
// bounds the index scan: older rows are pruned anyway (0 scans from the
// oldest row).
func (s *Store) ErasePayloadsBatch(ctx context.Context, source string, retention, payloadRetention time.Duration, limit int) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
WITH expired AS (
    SELECT id FROM webhook_inbox
    WHERE source = $1 AND status = 'done' AND erased_at IS NULL AND received_at < now() - $2::interval
      AND ($3::interval IS NULL OR received_at >= now() - $3::interval)
    ORDER BY received_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED
), erased AS (
    UPDATE webhook_inbox AS i SET `+eraseLegacy+`, erased_at = now()
    FROM expired WHERE i.id = expired.id AND i.status = 'done'
    RETURNING i.id
), `+dropDeliveries("erased")+`
SELECT count(*) FROM erased`, source, payloadRetention, nullAge(retention), limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: erase payloads %s: %w", source, err)
	}
	return n, nil
}

// CountErasable counts what ErasePayloadsBatch would erase.
func (s *Store) CountErasable(ctx context.Context, source string, retention, payloadRetention time.Duration) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FROM webhook_inbox
WHERE source = $1 AND status = 'done' AND erased_at IS NULL AND received_at < now() - $2::interval
  AND ($3::interval IS NULL OR received_at >= now() - $3::interval)`, source, payloadRetention, nullAge(retention)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: count erasable %s: %w", source, err)
	}
	return n, nil
}

// nullAge is age as a nullable interval: nil for 0 (no bound).
func nullAge(age time.Duration) *time.Duration {
	if age <= 0 {
		return nil
	}
	return &age
}

// ErasedRow is a row Purge erased: its identity only, never its data.
type ErasedRow struct {
	ID      int64  `json:"id"`
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	// Status is the row's status before the purge.
	Status Status `json:"status"`
}

// notePurged is the last error of a pending row that Purge erased: it can
// no longer be processed, so it ends failed.
const notePurged = "erased by a purge before it was processed"

// Purge erases the rows sel selects, whatever their status, for an erasure
// request: their body, headers, payload, errors and note are removed and
// erased_at is set, in one transaction. Each row keeps its keys (source,
// event id, twin key), so that the provider redelivering the event does not
// bring the data back in. A pending row becomes failed (its job then finds
// nothing to do). Rows erased before are left alone. It refuses a selection
// that narrows nothing (ErrEmptySelection), and returns the erased rows'
// identities in id order.
func (s *Store) Purge(ctx context.Context, sel *Selection) ([]ErasedRow, error) {
	if !sel.Narrows() {
		return nil, ErrEmptySelection
	}
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
WITH chosen AS (
    SELECT i.id, i.status FROM webhook_inbox AS i
    WHERE i.erased_at IS NULL AND `+selectionWhere+`
    ORDER BY i.id
    FOR UPDATE
), erased AS (
    UPDATE webhook_inbox AS i
    SET `+eraseLegacy+`, attempt_errors = '[]', note = NULL, erased_at = now(),
        last_error = CASE chosen.status WHEN 'pending' THEN $8 WHEN 'failed' THEN 'erased by a purge' END,
        status = CASE WHEN chosen.status = 'pending' THEN 'failed' ELSE chosen.status END,
        processed_at = coalesce(i.processed_at, now())
    FROM chosen WHERE i.id = chosen.id
    RETURNING i.id, i.source, i.event_id, chosen.status
), `+dropDeliveries("erased")+`
SELECT * FROM erased ORDER BY id`, append(sel.args(), notePurged)...)
	if err != nil {
		return nil, fmt.Errorf("inbox: purge: %w", err)
	}
	erased, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ErasedRow])
	if err != nil {
		return nil, fmt.Errorf("inbox: purge: %w", err)
	}
	return erased, nil
}

// CountSelected counts the rows sel selects that are not erased yet: what
// Purge would erase.
func (s *Store) CountSelected(ctx context.Context, sel *Selection) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox AS i WHERE i.erased_at IS NULL AND `+selectionWhere,
		sel.args()...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: count selected: %w", err)
	}
	return n, nil
}
