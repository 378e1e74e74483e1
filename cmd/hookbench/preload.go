package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// preloadPending makes n pending events, as the receiver's claim and enqueue
// leave them, in bulk: it reserves n ids from webhook_inbox's identity,
// lets River insert a job for each (InsertManyFast, River's COPY path, with
// the receiver's job args), and writes the rows with COPY, each linked to
// its job. The rows and the jobs are real; only the path is faster than n
// deliveries. River's jobs table must hold no other hookinbox jobs.
func preloadPending(ctx context.Context, pool *pgxpool.Pool, prefix string, n int) error {
	var base int64
	err := pool.QueryRow(ctx, `
SELECT setval(pg_get_serial_sequence('webhook_inbox', 'id'),
              nextval(pg_get_serial_sequence('webhook_inbox', 'id')) + $1 - 1) - $1 + 1`, n).Scan(&base)
	if err != nil {
		return fmt.Errorf("reserve inbox ids: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler), MaxAttempts: 10})
	if err != nil {
		return err
	}
	eventID := func(seq int64) string { return fmt.Sprintf("%s_%09d", prefix, seq) }
	err = inParallel(n, 2, 5000, func(lo, hi int) error {
		params := make([]river.InsertManyParams, 0, hi-lo)
		for seq := int64(lo); seq < int64(hi); seq++ {
			params = append(params, river.InsertManyParams{
				Args: inbox.JobArgs{InboxID: base + seq, Source: benchSource, EventID: eventID(seq)},
			})
		}
		_, err := client.InsertManyFast(ctx, params)
		return err
	})
	if err != nil {
		return fmt.Errorf("insert River jobs: %w", err)
	}
	jobIDs := make([]int64, n)
	rows, err := pool.Query(ctx, `SELECT (args->>'inbox_id')::bigint, id FROM river_job WHERE kind = $1`, inbox.JobKind)
	if err != nil {
		return err
	}
	var inboxID, jobID int64
	_, err = pgx.ForEachRow(rows, []any{&inboxID, &jobID}, func() error {
		if i := inboxID - base; i >= 0 && i < int64(n) {
			jobIDs[i] = jobID
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read job ids: %w", err)
	}
	now := time.Now()
	cols := []string{"id", "source", "provider", "event_id", "event_type", "payload", "body", "headers", "status", "received_at", "river_job_id"}
	return inParallel(n, 2, n, func(lo, hi int) error {
		src := &rowSource{seq: int64(lo), end: int64(hi), row: func(seq int64) ([]any, error) {
			ev, err := newEvent(eventID(seq), seq, now)
			if err != nil {
				return nil, err
			}
			return []any{base + seq, ev.Source, ev.Provider, ev.EventID, ev.EventType, string(ev.Payload), ev.Body,
				headersJSON(ev), "pending", now, jobIDs[seq]}, nil
		}}
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"webhook_inbox"}, cols, src); err != nil {
			return fmt.Errorf("copy pending rows: %w", err)
		}
		return nil
	})
}

// copyDoneRows loads n processed events straight into webhook_inbox with
// COPY, two streams at once: rows as the receiver and a worker leave them
// (status done, payload, raw body, audit headers, processed 40 ms after
// arrival), received evenly over the last 30 days, as a retention window
// fills.
func copyDoneRows(ctx context.Context, pool *pgxpool.Pool, n int) error {
	cols := []string{"source", "provider", "event_id", "event_type", "payload", "body", "headers",
		"status", "attempts", "received_at", "processed_at", "river_job_id"}
	const window = 30 * 24 * time.Hour
	oldest := time.Now().Add(-window)
	return inParallel(n, 2, n, func(lo, hi int) error {
		src := &rowSource{seq: int64(lo), end: int64(hi), row: func(seq int64) ([]any, error) {
			received := oldest.Add(time.Duration(seq) * (window / time.Duration(n)))
			ev, err := newEvent(fmt.Sprintf("msg_hist_%010d", seq), seq, received)
			if err != nil {
				return nil, err
			}
			return []any{ev.Source, ev.Provider, ev.EventID, ev.EventType, string(ev.Payload), ev.Body, headersJSON(ev),
				"done", 1, received, received.Add(40 * time.Millisecond), seq + 1}, nil
		}}
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"webhook_inbox"}, cols, src); err != nil {
			return fmt.Errorf("copy processed rows: %w", err)
		}
		return nil
	})
}

// headersJSON encodes an event's audit headers as the claim stores them.
func headersJSON(ev inbox.NewEvent) string {
	h, _ := json.Marshal(ev.Headers) // a map of strings always encodes
	return string(h)
}

// inParallel splits [0, n) into chunks of at most chunk and runs fn on them
// from workers goroutines, returning the first error.
func inParallel(n, workers, chunk int, fn func(lo, hi int) error) error {
	per := min(chunk, (n+workers-1)/workers)
	work := make(chan [2]int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for r := range work {
				if err := fn(r[0], r[1]); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for lo := 0; lo < n; lo += per {
		work <- [2]int{lo, min(lo+per, n)}
	}
	close(work)
	wg.Wait()
	return firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// rowSource feeds CopyFrom the rows row makes for [seq, end).
type rowSource struct {
	seq, end int64
	row      func(seq int64) ([]any, error)
	values   []any
	err      error
}

// Next implements pgx.CopyFromSource.
func (r *rowSource) Next() bool {
	if r.seq >= r.end || r.err != nil {
		return false
	}
	r.values, r.err = r.row(r.seq)
	r.seq++
	return r.err == nil
}

// Values implements pgx.CopyFromSource.
func (r *rowSource) Values() ([]any, error) { return r.values, r.err }

// Err implements pgx.CopyFromSource.
func (r *rowSource) Err() error { return r.err }
