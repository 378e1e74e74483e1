package inboxstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backlog is the rows of one source and status that are not done.
type Backlog struct {
	Source string `json:"source"`
	Status Status `json:"status"`
	Count  int64  `json:"count"`
	// Oldest is the received_at of the oldest of them.
	Oldest time.Time `json:"oldest"`
}

// Backlog counts the pending and failed rows by source and status, with the
// oldest of each, through the partial indexes on those statuses: it reads
// no done row, so it stays cheap on a large inbox.
func (s *Store) Backlog(ctx context.Context) ([]Backlog, error) {
	rows, err := s.pool.Query(ctx, `
SELECT source, 'pending', count(*), min(received_at) FROM webhook_inbox WHERE status = 'pending' GROUP BY source
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

// QueueDepth is the River jobs of one queue in one unfinished state.
type QueueDepth struct {
	Queue string `json:"queue"`
	// State is available, scheduled, retryable, running or pending.
	State string `json:"state"`
	Count int64  `json:"count"`
}

// QueueDepths counts River's unfinished jobs of every kind by queue and
// state. It reads river_job, which River owns, because River's client has
// no count: an inbox's backlog and its queues' depth are read together.
func (s *Store) QueueDepths(ctx context.Context) ([]QueueDepth, error) {
	rows, err := s.pool.Query(ctx, `
SELECT queue, state::text, count(*) FROM river_job
WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending')
GROUP BY queue, state`)
	if err != nil {
		return nil, fmt.Errorf("inbox: queue depths: %w", err)
	}
	depths, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueueDepth])
	if err != nil {
		return nil, fmt.Errorf("inbox: queue depths: %w", err)
	}
	return depths, nil
}
