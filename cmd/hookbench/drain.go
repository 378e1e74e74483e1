package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// waitDrained polls until no row is pending, and reports true, or until
// the deadline passes, and reports false. It fails when the worker exits.
func waitDrained(ctx context.Context, store *inbox.Store, workers []*Proc, deadline time.Duration) (bool, error) {
	end := time.Now().Add(deadline)
	for {
		n, err := store.CountPending(ctx)
		if err != nil {
			return false, err
		}
		if n == 0 {
			return true, nil
		}
		if time.Now().After(end) {
			return false, nil
		}
		// Every worker must still run, or "2 workers" would be measuring 1.
		for _, w := range workers {
			select {
			case <-w.done:
				return false, fmt.Errorf("%s exited with %d events pending: %w (log: %s)", w.Name, n, w.err, w.tail())
			default:
			}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// phaseDrain measures (e): River's own no-op burn-down, then drains of
// preloaded events by 1 and 2 noop workers and 1 and 2 ledger workers.
func (b *bench) phaseDrain(ctx context.Context) error {
	if err := b.resetTables(ctx); err != nil {
		return err
	}
	var errs []error
	river, err := runRiverCeiling(ctx, b, b.opts.RiverJobs)
	if err != nil {
		errs = append(errs, fmt.Errorf("River ceiling: %w", err))
	} else {
		b.report.River = river
		progress("   River no-op burn-down: %d jobs in %.1f s: %.0f jobs/s", river.Jobs, river.Seconds, river.JobsPerSec)
	}
	for _, d := range []struct {
		binary, handler string
		workers         int
	}{{"worker", "noop", 1}, {"worker", "noop", 2}, {"ledger", "ledger", 1}, {"ledger", "ledger", 2}} {
		r, err := b.drain(ctx, d.binary, d.handler, d.workers)
		if r != nil {
			b.report.Drains = append(b.report.Drains, r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s × %d: %w", d.handler, d.workers, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// drain preloads opts.DrainEvents pending events and times workers
// processes of binary from their start until every event is done.
func (b *bench) drain(ctx context.Context, binary, handler string, workers int) (*DrainResult, error) {
	n := b.opts.DrainEvents
	if err := b.resetTables(ctx); err != nil {
		return nil, err
	}
	r := &DrainResult{Handler: handler, Workers: workers, Events: n}
	t0 := time.Now()
	if err := preloadPending(ctx, b.pool, b.store, fmt.Sprintf("msg_drain_%s%d", handler, workers), n); err != nil {
		return nil, err
	}
	r.PreloadSecs = time.Since(t0).Seconds()
	if err := b.store.Vacuum(ctx); err != nil {
		return nil, err
	}
	if err := settle(ctx, b.pool, "river_job"); err != nil {
		return nil, err
	}
	var start time.Time
	if err := b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
		return nil, err
	}
	cpu0 := takeCPU(b.postmaster)
	procs := make([]*Proc, 0, workers)
	defer func() {
		for _, p := range procs {
			_ = b.stop(p)
		}
	}()
	for i := range workers {
		profile := ""
		if b.opts.CPUProfile != "" && handler == "noop" && workers == 1 {
			profile = b.profilePath("worker-noop.pprof")
			b.report.Profiles = append(b.report.Profiles, profile)
		}
		p, _, err := b.startWorker(fmt.Sprintf("%s-%s%d-%d", binary, handler, workers, i+1), binary, handler, profile)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	drained, err := waitDrained(ctx, b.store, procs, b.opts.DrainDeadline)
	cpu1 := takeCPU(b.postmaster, procs...)
	c, qerr := b.store.Count(ctx, nil)
	if qerr != nil {
		return nil, qerr
	}
	r.Done, r.Failed = c.Done, c.Failed
	// The drain ended with the last row processed (or now, if none was).
	end, qerr := b.store.LastProcessedAt(ctx)
	if qerr == nil && end.IsZero() {
		qerr = b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&end)
	}
	if qerr != nil {
		return nil, qerr
	}
	r.Seconds = end.Sub(start).Seconds()
	r.EventsPerSec = perSec(r.Done, end.Sub(start))
	r.CPU = cpuSince(cpu0, cpu1, r.Done)
	r.DeadlineHit = !drained
	for _, p := range procs {
		rss, _ := p.Sample()
		r.PeakRSSMB = max(r.PeakRSSMB, mb(rss))
	}
	progress("   %s × %d: %d of %d events done (%d failed) in %.1f s: %.0f events/s; peak RSS %.0f MB",
		handler, workers, r.Done, n, r.Failed, r.Seconds, r.EventsPerSec, r.PeakRSSMB)
	return r, err
}
