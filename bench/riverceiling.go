package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// noopArgs is the trivial job of River's own ceiling.
type noopArgs struct {
	Num int `json:"num"`
}

// Kind implements river.JobArgs.
func (noopArgs) Kind() string { return "hookbench_noop" }

// noopWorker works noopArgs by doing nothing.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

// Work implements river.Worker.
func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// RiverResult is River's own no-op throughput, measured like `river bench`
// in burn-down mode.
type RiverResult struct {
	// Workers and CooldownMs are the client's MaxWorkers and FetchCooldown.
	Workers    int     `json:"workers"`
	CooldownMs float64 `json:"fetch_cooldown_ms"`
	Jobs       int     `json:"jobs"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	Seconds    float64 `json:"seconds"`
	InsertSecs float64 `json:"insert_seconds"`
	CPU        *CPUUse `json:"cpu,omitempty"`
}

// riverSettings are a burn-down client's settings.
type riverSettings struct {
	workers            int
	cooldown, interval time.Duration
}

// runRiverCeiling measures River's no-op throughput on the benchmark's
// database the way `river bench --num-total-jobs n` does: it empties and
// compacts river_job, inserts n jobs in batches of 5,000, then starts a
// client with rs (River's benchmark uses 2,000 workers, 2 ms fetch
// cooldown, 20 ms poll) and times it from start until the last job
// completed, counting completions through a subscription.
func runRiverCeiling(ctx context.Context, b *bench, n int, rs riverSettings) (*RiverResult, error) {
	pool, err := newPool(ctx, b.dbURL, 16)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	for _, q := range []string{"TRUNCATE river_job", "VACUUM FULL river_job"} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:     rs.cooldown,
		FetchPollInterval: rs.interval,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: rs.workers}},
		Workers:           workers,
	})
	if err != nil {
		return nil, err
	}

	insertStart := time.Now()
	const batch = 5000
	params := make([]river.InsertManyParams, 0, batch)
	for lo := 0; lo < n; lo += batch {
		params = params[:0]
		for i := lo; i < min(lo+batch, n); i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Num: i}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return nil, fmt.Errorf("insert River jobs: %w", err)
		}
	}
	insertSecs := time.Since(insertStart).Seconds()
	if err := settle(ctx, pool, "river_job"); err != nil {
		return nil, err
	}

	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: min(n, 100_000),
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	cpu0 := takeCPU(b.postmaster)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	// Bounded, generously: River's ceiling is never below 1,000 jobs/s.
	limit := max(2*b.opts.DrainDeadline, time.Duration(n)*time.Millisecond)
	deadline := time.After(limit)
	var last time.Time
	for done := 0; done < n; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			return nil, fmt.Errorf("River worked %d of %d jobs within %s", done, n, limit)
		case ev, ok := <-events:
			if !ok {
				return nil, fmt.Errorf("River subscription closed after %d of %d jobs", done, n)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return nil, fmt.Errorf("River job %d ended %s", ev.Job.ID, ev.Job.State)
			}
			done++
			last = time.Now()
		}
	}
	elapsed := last.Sub(start)
	return &RiverResult{
		Workers: rs.workers, CooldownMs: float64(rs.cooldown) / float64(time.Millisecond),
		Jobs: n, JobsPerSec: perSec(int64(n), elapsed), Seconds: elapsed.Seconds(), InsertSecs: insertSecs,
		CPU: cpuSince(cpu0, takeCPU(b.postmaster), int64(n)),
	}, nil
}
