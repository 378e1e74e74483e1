package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// The benchmark's own statements: measuring, emptying and compacting the
// tables between phases, as River's bench truncates and vacuums river_job
// itself. The product never runs them, so they live here rather than in
// pkg/inbox. No process may be using a table while it is emptied.

// benchTables are the tables a phase fills: the inbox, River's jobs and the
// ledger's.
const benchTables = "webhook_inbox, river_job, ledger_entries, ledger_accounts"

// truncateTables empties the inbox, River's jobs and the ledger.
func truncateTables(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, "TRUNCATE "+benchTables); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return nil
}

// vacuum runs VACUUM (ANALYZE) on each table, so that neither autovacuum
// nor the stale statistics of a bulk load land in a later measurement.
func vacuum(ctx context.Context, pool *pgxpool.Pool, tables ...string) error {
	for _, t := range tables {
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+t); err != nil {
			return fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	return nil
}

// inboxBytes returns the size of webhook_inbox with its indexes and TOAST.
func inboxBytes(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('webhook_inbox')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("inbox size: %w", err)
	}
	return n, nil
}

// lastProcessedAt returns when the last row was done or failed; zero when
// none was.
func lastProcessedAt(ctx context.Context, pool *pgxpool.Pool) (time.Time, error) {
	var at *time.Time
	if err := pool.QueryRow(ctx, `SELECT max(processed_at) FROM webhook_inbox`).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("last processed: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// anyPending reports whether a row is pending whose event id starts with
// prefix ("" for any row). It stops at the first live entry of the pending
// rows' partial index, so it stays cheap to poll while a large backlog
// drains; a count(*) would visit every pending row (and, mid-drain, every
// dead index entry) on each poll, and cost PostgreSQL a third of a core.
func anyPending(ctx context.Context, pool *pgxpool.Pool, prefix string) (bool, error) {
	var found bool
	err := pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM webhook_inbox WHERE status = 'pending' AND starts_with(event_id, $1))`, prefix).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("any pending of %q: %w", prefix, err)
	}
	return found, nil
}

// Ages is what doneAges and agesWithPrefix measure.
type Ages struct {
	// Pending and Done count rows by status.
	Pending, Done int64
	// P50, P99 and Max are percentiles of the age at done (processed_at -
	// received_at) of the done rows measured; zero when there are none.
	P50, P99, Max time.Duration
	// LastProcessed is the latest processed_at of the done rows measured;
	// zero when none is done.
	LastProcessed time.Time
}

// doneAges counts the done rows (Done) and measures the age at done of
// those received at or after since. Pending is not counted.
func doneAges(ctx context.Context, pool *pgxpool.Pool, since time.Time) (*Ages, error) {
	a, err := ages(ctx, pool, `
SELECT 0::bigint, count(*), `+percentiles("received_at >= $1")+`
FROM webhook_inbox WHERE status = 'done'`, since)
	if err != nil {
		return nil, fmt.Errorf("ages: %w", err)
	}
	return a, nil
}

// agesWithPrefix counts the rows whose event id starts with prefix and
// measures the done ones' age at done.
func agesWithPrefix(ctx context.Context, pool *pgxpool.Pool, prefix string) (*Ages, error) {
	a, err := ages(ctx, pool, `
SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done'), `+percentiles("status = 'done'")+`
FROM webhook_inbox WHERE starts_with(event_id, $1)`, prefix)
	if err != nil {
		return nil, fmt.Errorf("ages of %q: %w", prefix, err)
	}
	return a, nil
}

// percentiles selects p50, p99 and max of the age at done (in
// microseconds) and the latest processed_at, of the rows filter selects.
func percentiles(filter string) string {
	age := func(agg string) string {
		return fmt.Sprintf("coalesce((1e6 * extract(epoch FROM %s FILTER (WHERE %s)))::bigint, 0)", agg, filter)
	}
	return age("percentile_disc(0.5) WITHIN GROUP (ORDER BY processed_at - received_at)") + ", " +
		age("percentile_disc(0.99) WITHIN GROUP (ORDER BY processed_at - received_at)") + ", " +
		age("max(processed_at - received_at)") + ", " +
		"max(processed_at) FILTER (WHERE " + filter + ")"
}

// ages scans one row of counts and percentiles (see percentiles).
func ages(ctx context.Context, pool *pgxpool.Pool, sql string, arg any) (*Ages, error) {
	var a Ages
	var p50, p99, maxAge int64 // microseconds
	var last *time.Time
	if err := pool.QueryRow(ctx, sql, arg).Scan(&a.Pending, &a.Done, &p50, &p99, &maxAge, &last); err != nil {
		return nil, err
	}
	a.P50, a.P99, a.Max = time.Duration(p50)*time.Microsecond, time.Duration(p99)*time.Microsecond, time.Duration(maxAge)*time.Microsecond
	if last != nil {
		a.LastProcessed = *last
	}
	return &a, nil
}

// Tally counts inbox rows and their River jobs (of inboxstore.JobKind: a
// worker's periodic reaper jobs are not counted).
type Tally struct {
	Rows, Jobs int64
}

// tally counts the rows and the event jobs.
func tally(ctx context.Context, pool *pgxpool.Pool) (Tally, error) {
	var t Tally
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_inbox), (SELECT count(*) FROM river_job WHERE kind = $1)`,
		inboxstore.JobKind).Scan(&t.Rows, &t.Jobs)
	if err != nil {
		return t, fmt.Errorf("count rows and jobs: %w", err)
	}
	return t, nil
}
