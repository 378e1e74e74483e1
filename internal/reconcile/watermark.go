package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// Watermarks stores, per source, how far reconciliation got: the start of
// its last run that finished (table hookinbox_reconcile_watermark, which
// this file alone writes).
type Watermarks struct {
	db inboxstore.DBTX
}

// NewWatermarks returns the watermarks stored in db.
func NewWatermarks(db inboxstore.DBTX) *Watermarks { return &Watermarks{db: db} }

// Get returns source's watermark, and false when no run has finished yet.
func (w *Watermarks) Get(ctx context.Context, source string) (time.Time, bool, error) {
	var at time.Time
	err := w.db.QueryRow(ctx, `SELECT reconciled_until FROM hookinbox_reconcile_watermark WHERE source = $1`, source).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("reconcile: read the watermark: %w", err)
	}
	return at, true, nil
}

// Advance moves source's watermark to at, never back.
func (w *Watermarks) Advance(ctx context.Context, source string, at time.Time) error {
	_, err := w.db.Exec(ctx, `
INSERT INTO hookinbox_reconcile_watermark (source, reconciled_until) VALUES ($1, $2)
ON CONFLICT (source) DO UPDATE
SET reconciled_until = greatest(hookinbox_reconcile_watermark.reconciled_until, excluded.reconciled_until), updated_at = now()`,
		source, at)
	if err != nil {
		return fmt.Errorf("reconcile: advance the watermark: %w", err)
	}
	return nil
}

// since is where a run that starts at start lists from: the watermark less
// lookback (events created just before the last run may have been listed
// late), or start less lookback when no run finished yet or the watermark is
// later, never before window (how far back the provider lists).
func since(start time.Time, watermark time.Time, ok bool, lookback, window time.Duration) time.Time {
	from := start.Add(-lookback)
	if ok && watermark.Add(-lookback).Before(from) {
		from = watermark.Add(-lookback)
	}
	if floor := start.Add(-window); window > 0 && from.Before(floor) {
		from = floor
	}
	return from
}
