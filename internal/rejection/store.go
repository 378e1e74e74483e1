package rejection

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Sample is one refused delivery, as recorded.
type Sample struct {
	ID         int64             `json:"id"`
	Source     string            `json:"source"`
	RejectedAt time.Time         `json:"rejected_at"`
	Reason     string            `json:"reason"`
	Status     int               `json:"status"`
	RemoteAddr string            `json:"remote_addr"`
	RequestID  string            `json:"request_id,omitempty"`
	Headers    map[string]string `json:"headers"`
}

// Store runs the statements on hookinbox_rejection, its only owner.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Insert records s (its ID and, when zero, RejectedAt are the database's)
// and deletes the source's rows older than its keep newest, in one
// transaction.
func (st *Store) Insert(ctx context.Context, s *Sample, keep int) error {
	headers, err := json.Marshal(s.Headers)
	if err != nil {
		return fmt.Errorf("rejection: encode headers: %w", err)
	}
	var at *time.Time
	if !s.RejectedAt.IsZero() {
		at = &s.RejectedAt
	}
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
INSERT INTO hookinbox_rejection (source, rejected_at, reason, status, remote_addr, request_id, headers)
VALUES ($1, coalesce($2::timestamptz, now()), $3, $4, $5, $6, $7::jsonb)`,
			s.Source, at, s.Reason, s.Status, s.RemoteAddr, s.RequestID, string(headers)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
DELETE FROM hookinbox_rejection WHERE source = $1 AND id <= (
    SELECT id FROM hookinbox_rejection WHERE source = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, s.Source, keep)
		return err
	})
	if err != nil {
		return fmt.Errorf("rejection: record: %w", err)
	}
	return nil
}

// List returns source's samples, newest first, at most limit (all when
// limit <= 0).
func (st *Store) List(ctx context.Context, source string, limit int) ([]Sample, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := st.pool.Query(ctx, `
SELECT id, source, rejected_at, reason, status, remote_addr, request_id, headers FROM hookinbox_rejection
WHERE source = $1 ORDER BY id DESC LIMIT $2`, source, limit)
	if err != nil {
		return nil, fmt.Errorf("rejection: list: %w", err)
	}
	samples, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Sample])
	if err != nil {
		return nil, fmt.Errorf("rejection: list: %w", err)
	}
	return samples, nil
}

// Count counts every source's samples (for tests and stats).
func (st *Store) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_rejection`).Scan(&n); err != nil {
		return 0, fmt.Errorf("rejection: count: %w", err)
	}
	return n, nil
}

// Dump returns the whole table as text, one row a line, headers included:
// what a test greps for secrets.
func (st *Store) Dump(ctx context.Context) (string, error) {
	var out string
	err := st.pool.QueryRow(ctx, `
SELECT coalesce(string_agg(t::text, E'\n' ORDER BY t.id), '') FROM hookinbox_rejection AS t`).Scan(&out)
	if err != nil {
		return "", fmt.Errorf("rejection: dump: %w", err)
	}
	return out, nil
}
