// Package bulkload writes many webhook_inbox rows fast, for tests and the
// benchmark (bench/) that need a full inbox: it reserves row ids from the
// table's identity and writes rows with one COPY, as the receiver and a
// worker would have left them.
//
// It is a test and bench factory, not a product path: it enqueues no jobs
// and applies none of the claim's rules (the key policy, deduplication). A
// row whose key is taken fails the whole load, and an event is written as
// it is given, so give it valid ids. Several loads may run at once.
package bulkload

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// Row is one row for Load: a delivery of one event, and the state that the
// receiver's claim and a worker would have left its row in.
type Row struct {
	// ID is the row's id, reserved with ReserveIDs.
	ID int64
	// Delivery holds the row's one event, written as it is: its id, type
	// and payload, and the delivery's source, provider, body and headers.
	Delivery *inboxstore.Delivery
	// Status is the row's status. Defaults to inbox.StatusPending.
	Status inbox.Status
	// Attempts counts the row's handler runs. Defaults to 0.
	Attempts int
	// LastError is a failed row's reason. Optional.
	LastError string
	// ReceivedAt is when the row was claimed. Required.
	ReceivedAt time.Time
	// ProcessedAt is when the row was done or failed; zero for never.
	ProcessedAt time.Time
}

// ReserveIDs reserves n consecutive row ids from webhook_inbox's identity,
// so that jobs can be inserted for rows loaded with them, and returns the
// first. A later claim takes ids after them.
func ReserveIDs(ctx context.Context, pool *pgxpool.Pool, n int) (int64, error) {
	var first int64
	err := pool.QueryRow(ctx, `
SELECT setval(pg_get_serial_sequence('webhook_inbox', 'id'),
              nextval(pg_get_serial_sequence('webhook_inbox', 'id')) + $1 - 1) - $1 + 1`, n).Scan(&first)
	if err != nil {
		return 0, fmt.Errorf("bulkload: reserve ids: %w", err)
	}
	return first, nil
}

// Load writes n rows with one COPY, row(i) making the i-th.
func Load(ctx context.Context, pool *pgxpool.Pool, n int, row func(i int) (*Row, error)) error {
	cols := []string{"id", "source", "provider", "event_id", "event_type", "payload", "body", "headers",
		"status", "attempts", "last_error", "received_at", "processed_at"}
	src := &source{n: n, row: row}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"webhook_inbox"}, cols, src); err != nil {
		return fmt.Errorf("bulkload: %w", err)
	}
	return nil
}

// source feeds CopyFrom the values of Load's rows.
type source struct {
	i, n   int
	row    func(i int) (*Row, error)
	values []any
	err    error
}

// Next implements pgx.CopyFromSource.
func (s *source) Next() bool {
	if s.i >= s.n || s.err != nil {
		return false
	}
	s.values, s.err = s.load(s.i)
	s.i++
	return s.err == nil
}

func (s *source) load(i int) ([]any, error) {
	r, err := s.row(i)
	if err != nil {
		return nil, err
	}
	d := r.Delivery
	if len(d.Events) != 1 {
		return nil, fmt.Errorf("row %d has %d events, not 1", i, len(d.Events))
	}
	ev := d.Events[0]
	var payload, lastError, processedAt any
	if ev.Payload != nil {
		payload = string(ev.Payload)
	}
	if r.LastError != "" {
		lastError = r.LastError
	}
	if !r.ProcessedAt.IsZero() {
		processedAt = r.ProcessedAt
	}
	body := d.Body
	if body == nil {
		body = []byte{}
	}
	headers, err := json.Marshal(d.Headers)
	if err != nil {
		return nil, fmt.Errorf("row %d: encode headers: %w", i, err)
	}
	status := cmp.Or(r.Status, inbox.StatusPending)
	return []any{r.ID, d.Source, d.Provider, ev.ID, ev.Type, payload, body, string(headers),
		string(status), r.Attempts, lastError, r.ReceivedAt, processedAt}, nil
}

// Values implements pgx.CopyFromSource.
func (s *source) Values() ([]any, error) { return s.values, s.err }

// Err implements pgx.CopyFromSource.
func (s *source) Err() error { return s.err }
