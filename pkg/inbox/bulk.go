package inbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds the statements that benchmarks and demos run on
// webhook_inbox: loading rows in bulk as the receiver and a worker would
// leave them, and measuring and emptying the table. The receiver and the
// workers never run them.

// LoadRow is one row for BulkLoad: a delivery of one event, and the state
// that the receiver's claim and a worker would have left its row in.
type LoadRow struct {
	// ID is the row's id, reserved with ReserveIDs.
	ID int64
	// Delivery holds the row's one event. The key policy applies as in a
	// claim (see Delivery): an event it fails is loaded as failed, with its
	// reason, whatever Status says.
	Delivery *Delivery
	// Status is the row's status. Defaults to pending.
	Status Status
	// Attempts counts the row's handler runs.
	Attempts int
	// ReceivedAt is when the row was claimed. Required.
	ReceivedAt time.Time
	// ProcessedAt is when the row was done or failed; zero for never.
	ProcessedAt time.Time
}

// ReserveIDs reserves n consecutive row ids from webhook_inbox's identity,
// so that jobs can be inserted for rows loaded with them, and
// returns the first.
func (s *Store) ReserveIDs(ctx context.Context, n int) (int64, error) {
	var first int64
	err := s.pool.QueryRow(ctx, `
SELECT setval(pg_get_serial_sequence('webhook_inbox', 'id'),
              nextval(pg_get_serial_sequence('webhook_inbox', 'id')) + $1 - 1) - $1 + 1`, n).Scan(&first)
	if err != nil {
		return 0, fmt.Errorf("inbox: reserve ids: %w", err)
	}
	return first, nil
}

// BulkLoad writes n rows with one COPY, row(i) making the i-th. It is for
// benchmarks and demos that need many rows fast: it enqueues no jobs and
// skips the claim's deduplication, so a row whose key is taken fails the
// whole load. Several BulkLoads may run at once.
func (s *Store) BulkLoad(ctx context.Context, n int, row func(i int) (*LoadRow, error)) error {
	cols := []string{"id", "source", "provider", "event_id", "event_type", "payload", "body", "headers",
		"status", "attempts", "last_error", "twin_key", "received_at", "processed_at"}
	src := &loadSource{n: n, row: row}
	if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{"webhook_inbox"}, cols, src); err != nil {
		return fmt.Errorf("inbox: bulk load: %w", err)
	}
	return nil
}

// loadSource feeds CopyFrom the values of BulkLoad's rows.
type loadSource struct {
	i, n   int
	row    func(i int) (*LoadRow, error)
	values []any
	err    error
}

// Next implements pgx.CopyFromSource.
func (l *loadSource) Next() bool {
	if l.i >= l.n || l.err != nil {
		return false
	}
	l.values, l.err = l.load(l.i)
	l.i++
	return l.err == nil
}

func (l *loadSource) load(i int) ([]any, error) {
	r, err := l.row(i)
	if err != nil {
		return nil, err
	}
	events := r.Delivery.events()
	if len(events) != 1 {
		return nil, fmt.Errorf("row %d has %d events, not 1", i, len(events))
	}
	ev := events[0]
	status := cmp.Or(r.Status, StatusPending)
	var payload, lastError, twinKey any
	if ev.FailReason != "" {
		status, lastError = StatusFailed, ev.FailReason
	} else if ev.Payload != nil {
		payload = string(ev.Payload)
	}
	if ev.TwinKey != "" {
		twinKey = ev.TwinKey
	}
	body := ev.Body
	if body == nil {
		body = []byte{}
	}
	headers, err := json.Marshal(ev.Headers)
	if err != nil {
		return nil, fmt.Errorf("row %d: encode headers: %w", i, err)
	}
	return []any{r.ID, ev.Source, ev.Provider, ev.EventID, ev.EventType, payload, body, string(headers),
		string(status), r.Attempts, lastError, twinKey, r.ReceivedAt, nullTime(r.ProcessedAt)}, nil
}

// Values implements pgx.CopyFromSource.
func (l *loadSource) Values() ([]any, error) { return l.values, l.err }

// Err implements pgx.CopyFromSource.
func (l *loadSource) Err() error { return l.err }

// Truncate empties webhook_inbox. Nothing may be using the table.
func (s *Store) Truncate(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `TRUNCATE webhook_inbox`); err != nil {
		return fmt.Errorf("inbox: truncate: %w", err)
	}
	return nil
}

// Vacuum runs VACUUM (ANALYZE) on webhook_inbox, so that neither autovacuum
// nor stale statistics of a bulk load land in a later measurement.
func (s *Store) Vacuum(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) webhook_inbox`); err != nil {
		return fmt.Errorf("inbox: vacuum: %w", err)
	}
	return nil
}

// TableBytes returns the size of webhook_inbox with its indexes and TOAST.
func (s *Store) TableBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('webhook_inbox')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("inbox: table size: %w", err)
	}
	return n, nil
}

// LastProcessedAt returns when the last row was done or failed; zero when
// none was.
func (s *Store) LastProcessedAt(ctx context.Context) (time.Time, error) {
	var at *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT max(processed_at) FROM webhook_inbox`).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("inbox: last processed: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// Ages is what DoneAges measures.
type Ages struct {
	// Done counts every done row.
	Done int64
	// P50, P99 and Max are percentiles of the age at done (processed_at -
	// received_at) of the done rows received since the given time; zero
	// when there are none.
	P50, P99, Max time.Duration
}

// DoneAges counts the done rows and measures how long those received at or
// after since took from their claim to done.
func (s *Store) DoneAges(ctx context.Context, since time.Time) (*Ages, error) {
	var a Ages
	var p50, p99, maxAge int64 // microseconds
	err := s.pool.QueryRow(ctx, `
SELECT count(*),
       coalesce((1e6 * extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY processed_at - received_at)
                                       FILTER (WHERE received_at >= $1)))::bigint, 0),
       coalesce((1e6 * extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY processed_at - received_at)
                                       FILTER (WHERE received_at >= $1)))::bigint, 0),
       coalesce((1e6 * extract(epoch FROM max(processed_at - received_at) FILTER (WHERE received_at >= $1)))::bigint, 0)
FROM webhook_inbox WHERE status = 'done'`, since).Scan(&a.Done, &p50, &p99, &maxAge)
	if err != nil {
		return nil, fmt.Errorf("inbox: ages: %w", err)
	}
	a.P50, a.P99, a.Max = time.Duration(p50)*time.Microsecond, time.Duration(p99)*time.Microsecond, time.Duration(maxAge)*time.Microsecond
	return &a, nil
}
