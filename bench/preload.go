package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/bulkload"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// preloadPending makes n pending events, as the receiver's claim and enqueue
// leave them, in bulk: it reserves n inbox ids, lets River insert a job for
// each (InsertManyFast, River's COPY path, with the receiver's job args),
// and bulk-loads the rows (a job's args name its row). The rows and the jobs
// are real; only the path is faster than n deliveries. The deposits credit
// as many accounts
// as accounts says (benchAccounts when 0).
func preloadPending(ctx context.Context, pool *pgxpool.Pool, prefix string, n, accounts int) error {
	base, err := bulkload.ReserveIDs(ctx, pool, n)
	if err != nil {
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler), MaxAttempts: 10})
	if err != nil {
		return err
	}
	eventID := func(seq int64) string { return fmt.Sprintf("%s_%09d", prefix, seq) }
	err = inParallel(n, 5000, func(lo, hi int) error {
		params := make([]river.InsertManyParams, 0, hi-lo)
		for seq := int64(lo); seq < int64(hi); seq++ {
			params = append(params, river.InsertManyParams{
				Args: inboxstore.JobArgs{InboxID: base + seq, Source: benchSource, EventID: eventID(seq)},
			})
		}
		_, err := client.InsertManyFast(ctx, params)
		return err
	})
	if err != nil {
		return fmt.Errorf("insert River jobs: %w", err)
	}
	now := time.Now()
	return inParallel(n, n, func(lo, hi int) error {
		err := bulkload.Load(ctx, pool, hi-lo, func(i int) (*bulkload.Row, error) {
			seq := int64(lo + i)
			d, err := newDelivery(eventID(seq), seq, accounts, now)
			if err != nil {
				return nil, err
			}
			return &bulkload.Row{ID: base + seq, Delivery: d, Status: inbox.StatusPending, ReceivedAt: now}, nil
		})
		if err != nil {
			return fmt.Errorf("load pending rows: %w", err)
		}
		return nil
	})
}

// copyDoneRows bulk-loads n processed events, two streams at once: rows as
// the receiver and a worker leave them (status done, payload, raw body,
// audit headers, processed 40 ms after arrival), received evenly over the
// last 30 days, as a retention window fills.
func copyDoneRows(ctx context.Context, pool *pgxpool.Pool, n int) error {
	const window = 30 * 24 * time.Hour
	oldest := time.Now().Add(-window)
	return copyDone(ctx, pool, n, "processed rows",
		func(seq int64) string { return fmt.Sprintf("msg_hist_%010d", seq) },
		func(seq int64) time.Time { return oldest.Add(time.Duration(seq) * (window / time.Duration(n))) })
}

// copyDone bulk-loads n processed events, two streams at once: event seq
// is named name(seq), received at received(seq) and processed 40 ms later.
// what names the rows in an error.
func copyDone(ctx context.Context, pool *pgxpool.Pool, n int, what string,
	name func(seq int64) string, received func(seq int64) time.Time,
) error {
	base, err := bulkload.ReserveIDs(ctx, pool, n)
	if err != nil {
		return err
	}
	return inParallel(n, n, func(lo, hi int) error {
		err := bulkload.Load(ctx, pool, hi-lo, func(i int) (*bulkload.Row, error) {
			seq := int64(lo + i)
			at := received(seq)
			d, err := newDelivery(name(seq), seq, 0, at)
			if err != nil {
				return nil, err
			}
			return &bulkload.Row{
				ID: base + seq, Delivery: d, Status: inbox.StatusDone, Attempts: 1,
				ReceivedAt: at, ProcessedAt: at.Add(40 * time.Millisecond),
			}, nil
		})
		if err != nil {
			return fmt.Errorf("load %s: %w", what, err)
		}
		return nil
	})
}

// loadStreams is how many bulk loads run at once: one per core here.
const loadStreams = 2

// inParallel splits [0, n) into chunks of at most chunk and runs fn on them
// from loadStreams goroutines, returning the first error.
func inParallel(n, chunk int, fn func(lo, hi int) error) error {
	workers := loadStreams
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
