package inboxstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventInfo is an inbox row as an operator looks it up: everything but the
// payload and body, with its River job's id and state.
type EventInfo struct {
	ID          int64      `json:"id"`
	Source      string     `json:"source"`
	Provider    string     `json:"provider"`
	EventID     string     `json:"event_id"`
	EventType   string     `json:"event_type"`
	Status      Status     `json:"status"`
	Attempts    int        `json:"attempts"`
	LastError   string     `json:"last_error,omitempty"`
	Note        string     `json:"note,omitempty"`
	RequestID   string     `json:"request_id,omitempty"`
	ReceivedAt  time.Time  `json:"received_at"`
	ProcessedAt *time.Time `json:"processed_at,omitempty"`
	// JobID is the row's newest River job; nil for a row failed on
	// arrival, which never had one, and once River has pruned its jobs.
	JobID *int64 `json:"job_id,omitempty"`
	// JobState is that job's state, "" when it has none or River pruned it.
	JobState string `json:"job_state,omitempty"`
	// AttemptErrors is the row's attempt history, oldest first (at most
	// AttemptHistoryMax entries): every failed run's error, not only the
	// last. It outlives the River job, which River's cleaner deletes.
	AttemptErrors []AttemptError `json:"attempt_errors"`
	// ErasedAt is when the row's body, headers and payload were erased
	// (payload_retention or a purge); nil while it has them.
	ErasedAt *time.Time `json:"erased_at,omitempty"`
	// Waiting says what a pending row no worker will take yet waits for:
	// "held: source paused" (held, or its source paused), "parked: behind
	// KEY" (its sequence key's earlier event), or "waiting: no worker routes
	// SOURCE (queue Q)" (no live worker works its job's queue). The first two are
	// what the backlog metrics count as held (see unclaimable); "" for a row
	// that waits for nothing, or is not pending.
	Waiting string `json:"waiting,omitempty"`
}

// FailedAt is when a failed row failed: its processed_at. Nil for a row
// that is not failed.
func (e *EventInfo) FailedAt() *time.Time {
	if e.Status != StatusFailed {
		return nil
	}
	return e.ProcessedAt
}

// ListParams selects the rows List returns. The zero value selects the
// newest rows of every source.
type ListParams struct {
	// Source, when set, selects one source's rows.
	Source string
	// Status, when set, selects the rows in that status.
	Status Status
	// EventType, when set, selects the rows of that exact type.
	EventType string
	// Since, when set, selects rows received at or after it.
	Since time.Time
	// Until, when set, selects rows received before it.
	Until time.Time
	// ErrorContains, when set, selects rows whose last error contains it,
	// ignoring case.
	ErrorContains string
	// Limit caps the rows returned, newest first. Defaults to 100.
	Limit int
}

const eventInfoColumns = `
SELECT i.id, i.source, i.provider, i.event_id, i.event_type, i.status, i.attempts, coalesce(i.last_error, ''),
       coalesce(i.note, ''), coalesce(i.request_id, ''), i.received_at, i.processed_at, j.id, coalesce(j.state::text, ''),
       i.attempt_errors, i.erased_at, ` + waiting + `
FROM webhook_inbox AS i
LEFT JOIN LATERAL (` + newestJob + `) AS j ON true`

// waiting is EventInfo.Waiting of row i, in the order a worker would meet
// the reasons: the pause first, then the sequence key, then a live worker
// working its job's queue (hookinbox_worker_routes, pkg/worker's record of
// the routes each worker runs there; a worker that works the queue settles
// an event it has no route for as unrouted, so it does not wait).
const waiting = `CASE
  WHEN i.status <> 'pending' THEN ''
  WHEN i.held_at IS NOT NULL OR NOT ` + notPaused + ` THEN 'held: source paused'
  WHEN EXISTS (SELECT 1 FROM hookinbox_sequence_park AS k WHERE k.inbox_id = i.id)
    THEN 'parked: behind ' || (SELECT k.seq_key FROM hookinbox_sequence_park AS k WHERE k.inbox_id = i.id)
  WHEN j.queue IS NOT NULL AND NOT EXISTS (SELECT 1 FROM hookinbox_worker_routes AS w
    WHERE w.queue = j.queue AND w.state = 'working' AND w.expires_at > now())
    THEN 'waiting: no worker routes ' || i.source || ' (queue ' || j.queue || ')'
  ELSE '' END`

// Lookup returns the row of source's event eventID, or ErrNotFound.
func (s *Store) Lookup(ctx context.Context, source, eventID string) (*EventInfo, error) {
	rows, err := s.pool.Query(ctx, eventInfoColumns+`
WHERE i.source = $1 AND i.event_id = $2`, planned, source, eventID)
	if err != nil {
		return nil, fmt.Errorf("inbox: look up event: %w", err)
	}
	info, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[EventInfo])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("inbox: look up event: %w", err)
	}
	return &info, nil
}

// List returns the rows params selects, newest first.
func (s *Store) List(ctx context.Context, params *ListParams) ([]EventInfo, error) {
	p := *params
	if p.Limit <= 0 {
		p.Limit = 100
	}
	sel := Selection{Source: p.Source, EventType: p.EventType, Since: p.Since, Until: p.Until, ErrorContains: p.ErrorContains}
	if p.Status != "" {
		sel.Statuses = []Status{p.Status}
	}
	rows, err := s.pool.Query(ctx, eventInfoColumns+`
WHERE `+selectionWhere+`
ORDER BY i.received_at DESC, i.id DESC
LIMIT $8`, append(sel.args(), p.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("inbox: list events: %w", err)
	}
	infos, err := pgx.CollectRows(rows, pgx.RowToStructByPos[EventInfo])
	if err != nil {
		return nil, fmt.Errorf("inbox: list events: %w", err)
	}
	return infos, nil
}
