// Package bulkload writes many webhook_inbox rows fast, for tests and the
// benchmark (bench/) that need a full inbox: it reserves row ids from the
// table's identity and writes rows, and their deliveries' bytes into
// webhook_inbox_delivery, with two COPYs that run side by side, as the
// receiver and a worker would have left them.
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

// Load writes n rows, row(i) making the i-th: the rows with one COPY and
// their deliveries with another, on two connections at once.
func Load(ctx context.Context, pool *pgxpool.Pool, n int, row func(i int) (*Row, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deliveries := make(chan []any, 1024)
	stored := make(chan error, 1)
	go func() {
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"webhook_inbox_delivery"}, []string{"inbox_id", "payload", "body", "headers"},
			&deliverySource{ch: deliveries})
		if err != nil {
			cancel() // the rows' COPY stops too
		}
		stored <- err
	}()
	cols := []string{"id", "source", "provider", "event_id", "event_type", "status", "attempts", "last_error", "received_at", "processed_at"}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"webhook_inbox"}, cols, &source{ctx: ctx, n: n, row: row, deliveries: deliveries})
	if err != nil {
		cancel() // before close: the deliveries' COPY must not commit a part
	}
	close(deliveries)
	if err := cmp.Or(err, <-stored); err != nil {
		return fmt.Errorf("bulkload: %w", err)
	}
	return nil
}

// source feeds CopyFrom the values of Load's rows, and hands each row's
// delivery to the deliveries' COPY.
type source struct {
	ctx        context.Context
	i, n       int
	row        func(i int) (*Row, error)
	deliveries chan<- []any
	values     []any
	err        error
}

// Next implements pgx.CopyFromSource.
func (s *source) Next() bool {
	if s.i >= s.n || s.err != nil {
		return false
	}
	var delivery []any
	s.values, delivery, s.err = s.load(s.i)
	s.i++
	if s.err == nil {
		select {
		case s.deliveries <- delivery:
		case <-s.ctx.Done():
			s.err = s.ctx.Err()
		}
	}
	return s.err == nil
}

func (s *source) load(i int) (row, delivery []any, err error) {
	r, err := s.row(i)
	if err != nil {
		return nil, nil, err
	}
	d := r.Delivery
	if len(d.Events) != 1 {
		return nil, nil, fmt.Errorf("row %d has %d events, not 1", i, len(d.Events))
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
		return nil, nil, fmt.Errorf("row %d: encode headers: %w", i, err)
	}
	status := cmp.Or(r.Status, inbox.StatusPending)
	return []any{r.ID, d.Source, d.Provider, ev.ID, ev.Type, string(status), r.Attempts, lastError, r.ReceivedAt, processedAt},
		[]any{r.ID, payload, body, string(headers)}, nil
}

// Values implements pgx.CopyFromSource.
func (s *source) Values() ([]any, error) { return s.values, s.err }

// Err implements pgx.CopyFromSource.
func (s *source) Err() error { return s.err }

// deliverySource feeds CopyFrom the deliveries source hands it.
type deliverySource struct {
	ch     <-chan []any
	values []any
}

// Next implements pgx.CopyFromSource.
func (s *deliverySource) Next() bool {
	var ok bool
	s.values, ok = <-s.ch
	return ok
}

// Values implements pgx.CopyFromSource.
func (s *deliverySource) Values() ([]any, error) { return s.values, nil }

// Err implements pgx.CopyFromSource.
func (s *deliverySource) Err() error { return nil }
