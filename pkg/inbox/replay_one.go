package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// ErrStillPending is returned by ReplayOne for a row that is pending: it
// has a job (or is held by a paused source) already.
var ErrStillPending = errors.New("inbox: event is pending; it will be processed without a replay")

// ReplayOne sends one done or failed row back to pending with a new River
// job, in one transaction: the row is never copied, so the handlers' own
// keys keep the reprocessing idempotent. It returns the row as it is after
// the replay, ErrNotFound, or ErrStillPending.
//
// This is the admin API's single-event replay; bulk replay by filter is a
// separate, rate-limited job.
func (s *Store) ReplayOne(ctx context.Context, client *river.Client[pgx.Tx], source, eventID string, queueFor func(string) string) (*EventInfo, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var row ClaimedRow
		var was string
		err := tx.QueryRow(ctx, `
WITH old AS (SELECT id, status FROM webhook_inbox WHERE source = $1 AND event_id = $2 FOR UPDATE)
UPDATE webhook_inbox AS i SET status = 'pending', processed_at = NULL, note = NULL
FROM old
WHERE i.id = old.id AND old.status <> 'pending'
RETURNING i.id, i.source, i.event_id, 'pending', i.event_type, coalesce(i.request_id, ''), old.status`,
			planned, source, eventID).Scan(&row.ID, &row.Source, &row.EventID, &row.Status, &row.EventType, &row.RequestID, &was)
		if errors.Is(err, pgx.ErrNoRows) {
			var status string
			if err := tx.QueryRow(ctx, `SELECT status FROM webhook_inbox WHERE source = $1 AND event_id = $2`, planned, source, eventID).Scan(&status); errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return ErrStillPending
		}
		if err != nil {
			return fmt.Errorf("inbox: replay: %w", err)
		}
		return s.EnqueueTx(ctx, tx, client, []ClaimedRow{row}, queueFor)
	})
	if err != nil {
		return nil, err
	}
	return s.Lookup(ctx, source, eventID)
}
