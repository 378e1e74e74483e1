package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// CeilingResult is one concurrency of measurement (a): a delivery's claim and
// enqueue (inboxstore.Ingester.Ingest of one event: the claim INSERT, River's
// InsertManyTx, the job link and COMMIT) issued in-process through pgx, one
// event per transaction, with no HTTP.
type CeilingResult struct {
	Concurrency  int     `json:"concurrency"`
	EventsPerSec float64 `json:"events_per_sec"`
	Latency      Summary `json:"latency"`
	Errors       int64   `json:"errors"`
	CPU          *CPUUse `json:"cpu,omitempty"`
}

// ceiling is measurement (a) at one concurrency: conc goroutines, each with
// a connection of its own, ingesting one event per transaction.
type ceiling struct {
	conc     int
	pool     *pgxpool.Pool
	ingester *inboxstore.Ingester
	seq      atomic.Int64
	max      int64
}

func newCeiling(ctx context.Context, dbURL string, conc int, maxEvents int64) (*ceiling, error) {
	pool, err := newPool(ctx, dbURL, conc)
	if err != nil {
		return nil, err
	}
	ingester, err := newIngester(pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &ceiling{conc: conc, pool: pool, ingester: ingester, max: maxEvents}, nil
}

func (c *ceiling) close() { c.pool.Close() }

// run ingests for warmup + window (or until the ceiling's event bound) and
// returns the window's figures as a LoadResult: New counts ingested
// events, Errors failed or duplicate ones.
func (c *ceiling) run(ctx context.Context, warmup, window time.Duration) *LoadResult {
	measureFrom := time.Now().Add(warmup)
	end := measureFrom.Add(window)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		lastDone atomic.Int64
		out      = &LoadResult{Status: map[int]int64{}}
	)
	for range c.conc {
		wg.Go(func() {
			r := LoadResult{}
			for ctx.Err() == nil && time.Now().Before(end) {
				i := c.seq.Add(1)
				if i > c.max {
					break
				}
				d, err := newDelivery(fmt.Sprintf("msg_ceiling%d_%09d", c.conc, i), i, 0, time.Now())
				if err != nil {
					panic(err) // the secret is a constant
				}
				t0 := time.Now() // building the event is not the ceiling's work

				res, err := c.ingester.Ingest(ctx, d)
				done := time.Now()
				r.Sent++
				if t0.Before(measureFrom) {
					continue
				}
				r.Requests++
				if err != nil || res.New != 1 {
					r.Errors++
					if err != nil && r.FirstError == "" {
						r.FirstError = err.Error()
					}
					continue
				}
				r.New++
				r.Latency.Record(done.Sub(t0))
				storeMax(&lastDone, done.UnixNano())
			}
			mu.Lock()
			out.add(&r)
			mu.Unlock()
		})
	}
	wg.Wait()
	if last := lastDone.Load(); last > 0 {
		out.Window = time.Unix(0, last).Sub(measureFrom)
	}
	return out
}
