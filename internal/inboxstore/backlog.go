package inboxstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// BacklogHeld is the Backlog status of pending rows no worker may claim:
// held (held_at), of a paused source, or parked behind their sequence key.
// It is not a row status.
const BacklogHeld Status = "held"

// Backlog is the rows of one source and status that are not done.
type Backlog struct {
	Source string `json:"source"`
	// Status is pending (claimable), BacklogHeld or failed.
	Status Status `json:"status"`
	Count  int64  `json:"count"`
	// Oldest is the received_at of the oldest of them.
	Oldest time.Time `json:"oldest"`
}

// Backlog counts the pending and failed rows by source and status, with the
// oldest of each, through the partial indexes on those statuses: it reads
// no done row, so it stays cheap on a large inbox. A pending row that is
// held, or whose source is paused, counts as BacklogHeld, not pending:
// pending is the claimable work, which the chart's KEDA trigger
// (charts/hookinbox/files/keda-backlog.sql) counts too, adding one for each
// sequence key with parked events (see unclaimable).
//
// This is the one place that decides which pending rows are claimable, for
// the backlog metrics and so for the primary alert, HookinboxBacklogOld
// (hookinbox_inbox_oldest_pending_age_seconds): see unclaimable.
func (s *Store) Backlog(ctx context.Context) ([]Backlog, error) {
	rows, err := s.pool.Query(ctx, `
SELECT i.source, CASE WHEN `+unclaimable+` THEN 'held' ELSE 'pending' END, count(*), min(i.received_at)
FROM webhook_inbox AS i WHERE i.status = 'pending' GROUP BY 1, 2
UNION ALL
SELECT source, 'failed', count(*), min(received_at) FROM webhook_inbox WHERE status = 'failed' GROUP BY source`)
	if err != nil {
		return nil, fmt.Errorf("inbox: backlog: %w", err)
	}
	backlog, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Backlog])
	if err != nil {
		return nil, fmt.Errorf("inbox: backlog: %w", err)
	}
	return backlog, nil
}

// unclaimable is the condition, on a pending row i, of a row no worker may
// claim yet: held, of a paused source, or parked behind an earlier event of
// its sequence key (hookinbox_sequence_park: the key's run wakes it). Such
// rows count as BacklogHeld and do not age the backlog, so that a
// deliberate hold, or a key's orderly queue, never fires the head-of-line
// alert; the key's head, which is claimable, does. The chart's KEDA
// trigger (charts/hookinbox/files/keda-backlog.sql) counts the claimable
// rows with the same condition (internal/metrics's claimable test holds the
// two equal), and adds each sequence key of a source that is not paused
// with a parked event still pending: when the event ahead of them stops
// being pending without a run (purged, or discarded and failed by the
// reaper), only the reaper's stalled pass, in a worker, wakes them.
const unclaimable = `(i.held_at IS NOT NULL OR NOT ` + notPaused + `
    OR EXISTS (SELECT 1 FROM hookinbox_sequence_park AS k WHERE k.inbox_id = i.id))`
