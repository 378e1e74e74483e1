package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// Store runs every statement on the outbox tables but Enqueue's.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const recordColumns = `id, key, destination, source, event_id, event_type, payload, headers, status,
    attempts, next_attempt_at, coalesce(last_error, ''), created_at, delivered_at`

func scanRecord(row pgx.CollectableRow) (*outbox.Record, error) {
	var r outbox.Record
	var headers []byte
	err := row.Scan(&r.ID, &r.Key, &r.Destination, &r.Source, &r.EventID, &r.EventType, &r.Payload, &headers,
		&r.Status, &r.Attempts, &r.NextAttemptAt, &r.LastError, &r.CreatedAt, &r.DeliveredAt)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(headers, &r.Headers); err != nil {
		return nil, fmt.Errorf("outbox: headers of message %d: %w", r.ID, err)
	}
	return &r, nil
}

// Claim takes up to limit due messages of destination for lease: in one
// short statement it counts an attempt and moves their next_attempt_at to
// now + lease, so that no other relay takes them meanwhile, and a relay that
// dies leaves them due again when the lease ends. Rows locked by another
// claim are skipped (FOR UPDATE SKIP LOCKED). A disabled destination's
// messages are not claimed.
//
// The claim commits durably (inboxstore.DurableTxOptions): synchronous_commit
// off, local or remote_write, whatever set it (the server, the database,
// the role), is raised to on for the claim, and a stronger setting
// (remote_apply) is kept. Its COMMIT then waits for the WAL to be flushed,
// on this server and on a synchronous standby, up to its own commit record,
// which lies after the commit record of every message it claimed. A handler
// transaction committed with synchronous_commit off (the worker's default)
// is therefore durable before its message leaves PostgreSQL; neither a
// crash nor a failover to the synchronous standby can lose an effect whose
// message was delivered.
func (s *Store) Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]*outbox.Record, error) {
	var recs []*outbox.Record
	err := inboxstore.BeginDurableFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
WITH due AS (
    SELECT id FROM hookinbox_outbox
    WHERE status = 'pending' AND next_attempt_at <= now() AND destination = $1
      AND NOT EXISTS (SELECT 1 FROM hookinbox_outbox_destination d WHERE d.name = $1 AND d.disabled_at IS NOT NULL)
    ORDER BY next_attempt_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE hookinbox_outbox o
SET attempts = o.attempts + 1, next_attempt_at = now() + $3 * interval '1 millisecond'
FROM due WHERE o.id = due.id
RETURNING o.`+recordColumns, destination, limit, lease.Milliseconds())
		if err != nil {
			return err
		}
		recs, err = pgx.CollectRows(rows, scanRecord)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: claim %s: %w", destination, err)
	}
	return recs, nil
}

// historyEntry is the SQL that appends one finished attempt to a row's
// history: when (the database's clock), the attempt, its status and its
// error (NULL for none), the last three given as placeholders.
func historyEntry(attempt, status, errText string) string {
	return `history || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
    'at', now(), 'attempt', ` + attempt + `::int, 'status', ` + status + `::text, 'error', ` + errText + `::text)))`
}

// MarkDelivered records that the claimed attempt of r was acknowledged. The
// mark is fenced by the attempt: a relay whose lease ran out, and whose
// message another relay claimed since, marks nothing.
func (s *Store) MarkDelivered(ctx context.Context, r *outbox.Record) error {
	_, err := s.pool.Exec(ctx, `
UPDATE hookinbox_outbox SET status = $3, delivered_at = now(), last_error = NULL, history = `+historyEntry("$2", "$3", "NULL")+`
WHERE id = $1 AND attempts = $2 AND status = 'pending'`,
		r.ID, r.Attempts, outbox.StatusDelivered)
	if err != nil {
		return fmt.Errorf("outbox: mark %q delivered: %w", r.Key, err)
	}
	return nil
}

// MarkRetry records the failed attempt of r, and makes r due again after
// delay, or failed for good when failed is true. It is fenced like
// MarkDelivered.
func (s *Store) MarkRetry(ctx context.Context, r *outbox.Record, cause error, delay time.Duration, failed bool) error {
	status := outbox.StatusPending
	if failed {
		status = outbox.StatusFailed
	}
	_, err := s.pool.Exec(ctx, `
UPDATE hookinbox_outbox SET status = $3, next_attempt_at = now() + $4 * interval '1 millisecond',
    last_error = $5, history = `+historyEntry("$2", "$3", "$5")+`
WHERE id = $1 AND attempts = $2 AND status = 'pending'`,
		r.ID, r.Attempts, status, delay.Milliseconds(), cause.Error())
	if err != nil {
		return fmt.Errorf("outbox: mark %q for retry: %w", r.Key, err)
	}
	return nil
}

// Release gives a claimed attempt of r back without counting it (the relay
// is stopping, or the destination was disabled or paused meanwhile): r is
// due again after delay.
func (s *Store) Release(ctx context.Context, r *outbox.Record, delay time.Duration) error {
	_, err := s.pool.Exec(ctx, `
UPDATE hookinbox_outbox SET attempts = attempts - 1, next_attempt_at = now() + $3 * interval '1 millisecond'
WHERE id = $1 AND attempts = $2 AND status = 'pending'`, r.ID, r.Attempts, delay.Milliseconds())
	if err != nil {
		return fmt.Errorf("outbox: release %q: %w", r.Key, err)
	}
	return nil
}

// Disable disables destination, for reason, until Enable.
func (s *Store) Disable(ctx context.Context, destination, reason string) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO hookinbox_outbox_destination (name, disabled_at, disabled_reason) VALUES ($1, now(), $2)
ON CONFLICT (name) DO UPDATE SET disabled_at = excluded.disabled_at, disabled_reason = excluded.disabled_reason`,
		destination, reason)
	if err != nil {
		return fmt.Errorf("outbox: disable %s: %w", destination, err)
	}
	return nil
}

// ErrNotDisabled is returned by Enable for a destination that is not
// disabled.
var ErrNotDisabled = errors.New("outbox: destination is not disabled")

// Enable enables a disabled destination: its pending messages are claimed
// again, at once.
func (s *Store) Enable(ctx context.Context, destination string) error {
	tag, err := s.pool.Exec(ctx, `
UPDATE hookinbox_outbox_destination SET disabled_at = NULL, disabled_reason = NULL
WHERE name = $1 AND disabled_at IS NOT NULL`, destination)
	if err != nil {
		return fmt.Errorf("outbox: enable %s: %w", destination, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s", ErrNotDisabled, destination)
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify('hookinbox_outbox', '')`); err != nil {
		return fmt.Errorf("outbox: wake the relays: %w", err)
	}
	return nil
}

// DisabledDestination is a destination a 410 disabled.
type DisabledDestination struct {
	Name       string
	DisabledAt time.Time
	Reason     string
}

// Disabled lists the disabled destinations.
func (s *Store) Disabled(ctx context.Context) ([]DisabledDestination, error) {
	rows, err := s.pool.Query(ctx, `
SELECT name, disabled_at, coalesce(disabled_reason, '') FROM hookinbox_outbox_destination
WHERE disabled_at IS NOT NULL ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("outbox: list disabled destinations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DisabledDestination, error) {
		var d DisabledDestination
		err := row.Scan(&d.Name, &d.DisabledAt, &d.Reason)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: list disabled destinations: %w", err)
	}
	return out, nil
}

// ListParams selects messages for List.
type ListParams struct {
	// Status defaults to StatusFailed.
	Status outbox.Status
	// Destination, when set, keeps only its messages.
	Destination string
	// Limit defaults to 100.
	Limit int
}

// List returns messages by status (failed by default), oldest first.
func (s *Store) List(ctx context.Context, p *ListParams) ([]*outbox.Record, error) {
	status := p.Status
	if status == "" {
		status = outbox.StatusFailed
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+` FROM hookinbox_outbox
WHERE status = $1 AND ($2 = '' OR destination = $2) ORDER BY id LIMIT $3`, status, p.Destination, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	return recs, nil
}

// ReplayParams selects failed messages for Replay: all of them (of
// Destination) when Keys is empty.
type ReplayParams struct {
	// Keys, when set, replays these messages only.
	Keys []string
	// Destination, when set, replays only its messages.
	Destination string
}

// Replay puts failed messages back to pending, due at once with their
// attempts reset (their history stays), and returns how many.
func (s *Store) Replay(ctx context.Context, p *ReplayParams) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE hookinbox_outbox SET status = 'pending', attempts = 0, next_attempt_at = now()
WHERE status = 'failed' AND (coalesce(cardinality($1::text[]), 0) = 0 OR key = ANY($1)) AND ($2 = '' OR destination = $2)`,
		p.Keys, p.Destination)
	if err != nil {
		return 0, fmt.Errorf("outbox: replay: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify('hookinbox_outbox', '')`); err != nil {
		return 0, fmt.Errorf("outbox: wake the relays: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Backlog is the messages of one destination and status (pending or
// failed).
type Backlog struct {
	Destination string
	Status      outbox.Status
	Count       int64
	// Oldest is the created_at of the oldest of them.
	Oldest time.Time
}

// Backlog counts the pending and failed messages by destination and
// status, with the oldest of each, through the partial indexes on those
// statuses: it reads no delivered message.
func (s *Store) Backlog(ctx context.Context) ([]Backlog, error) {
	rows, err := s.pool.Query(ctx, `
SELECT destination, 'pending', count(*), min(created_at) FROM hookinbox_outbox WHERE status = 'pending' GROUP BY destination
UNION ALL
SELECT destination, 'failed', count(*), min(created_at) FROM hookinbox_outbox WHERE status = 'failed' GROUP BY destination`)
	if err != nil {
		return nil, fmt.Errorf("outbox: backlog: %w", err)
	}
	backlog, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Backlog])
	if err != nil {
		return nil, fmt.Errorf("outbox: backlog: %w", err)
	}
	return backlog, nil
}
