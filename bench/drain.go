package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/pkg/worker"
)

// waitDrained polls until no row is pending, and reports true, or until
// the deadline passes, and reports false. It fails when a worker exits.
func waitDrained(ctx context.Context, pool *pgxpool.Pool, workers []*Proc, deadline time.Duration) (bool, error) {
	pending := func(ctx context.Context) (bool, error) { return anyPending(ctx, pool, "") }
	return waitNonePending(ctx, pending, workers, deadline, 250*time.Millisecond)
}

// waitNonePending calls pending every poll until it reports none (true),
// or until deadline passes (false). It fails when a worker exits. pending
// runs on the server being measured, so it must stay cheap: an EXISTS, not
// a count (which cost PostgreSQL a third of a core mid-drain).
func waitNonePending(ctx context.Context, pending func(context.Context) (bool, error), workers []*Proc,
	deadline, poll time.Duration,
) (bool, error) {
	end := time.Now().Add(deadline)
	for {
		left, err := pending(ctx)
		if err != nil {
			return false, err
		}
		if !left {
			return true, nil
		}
		if time.Now().After(end) {
			return false, nil
		}
		// Every worker must still run, or "2 workers" would be measuring 1.
		for _, w := range workers {
			select {
			case <-w.done:
				return false, fmt.Errorf("%s exited with events pending: %w (log: %s)", w.Name, w.err, w.tail())
			default:
			}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// drainRun is one drain of (e): workers processes of binary routing to
// handler, with concurrency and max_conns (0: the defaults).
type drainRun struct {
	binary, handler       string
	workers               int
	concurrency, maxConns int
	// groupMax is worker.group_max_events (0: the default).
	groupMax int
	// accounts is how many ledger accounts the deposits credit (0:
	// benchAccounts); a few make every group update the same hot rows.
	accounts int
}

func (d drainRun) name() string {
	n := fmt.Sprintf("%s%d", d.handler, d.workers)
	if d.concurrency > 0 {
		n += fmt.Sprintf("-c%d", d.concurrency)
	}
	if d.maxConns > 0 {
		n += fmt.Sprintf("-m%d", d.maxConns)
	}
	if d.groupMax > 0 {
		n += fmt.Sprintf("-g%d", d.groupMax)
	}
	if d.accounts > 0 {
		n += fmt.Sprintf("-a%d", d.accounts)
	}
	return n
}

// phaseDrain measures (e): River's own no-op burn-down, as River performs
// best here and with the worker's settings, then drains of preloaded events
// by 1 and 2 noop workers, one noop worker with concurrency 1000 and 20
// connections, and 1 and 2 ledger workers.
func (b *bench) phaseDrain(ctx context.Context) error {
	if err := b.resetTables(ctx); err != nil {
		return err
	}
	var errs []error
	for _, rc := range []struct {
		label string
		rs    riverSettings
		into  **RiverResult
	}{
		{"best: 1,000 workers, 2 ms cooldown", riverSettings{1000, 2 * time.Millisecond, 20 * time.Millisecond}, &b.report.River},
		{"worker's settings", riverSettings{worker.ConcurrencyDefault, worker.FetchCooldownDefault, worker.FetchPollIntervalDefault}, &b.report.RiverAsWorker},
	} {
		river, err := runRiverCeiling(ctx, b, b.opts.RiverJobs, rc.rs)
		if err != nil {
			errs = append(errs, fmt.Errorf("River ceiling (%s): %w", rc.label, err))
			continue
		}
		*rc.into = river
		progress("   River no-op burn-down (%s): %d jobs in %.1f s: %.0f jobs/s", rc.label, river.Jobs, river.Seconds, river.JobsPerSec)
	}
	// The defaults, then the defaults before issue 26 (concurrency 32, a
	// transaction per event), then a replay storm's settings: concurrency
	// 1000 on 20 connections, with and without group commit; the ledger
	// also with deposits to 5 hot accounts.
	storm := drainRun{workers: 1, concurrency: stormConcurrency, maxConns: 20, groupMax: 1}
	stormGroup := storm
	stormGroup.groupMax = worker.GroupMaxEventsAdvised
	oldDefaults := drainRun{binary: "worker", handler: "noop", workers: 1, concurrency: oldConcurrency, groupMax: 1}
	with := func(d drainRun, binary string, accounts int) drainRun {
		d.binary, d.handler, d.accounts = binary, binary, accounts
		if binary == "worker" {
			d.handler = "noop"
		}
		return d
	}
	drains := []drainRun{
		{binary: "worker", handler: "noop", workers: 1}, {binary: "worker", handler: "noop", workers: 2}, oldDefaults,
		with(storm, "worker", 0), with(stormGroup, "worker", 0),
		{binary: "ledger", handler: "ledger", workers: 1}, {binary: "ledger", handler: "ledger", workers: 2},
		with(stormGroup, "ledger", 0),
		{binary: "ledger", handler: "ledger", workers: 1, accounts: hotAccounts}, with(stormGroup, "ledger", hotAccounts),
	}
	for _, d := range drains {
		r, err := b.drain(ctx, d)
		if r != nil {
			b.report.Drains = append(b.report.Drains, r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.name(), err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// stormConcurrency is a replay storm's worker.concurrency in (e);
// oldConcurrency the default before issue 26.
const (
	stormConcurrency = 1000
	oldConcurrency   = 32
)

// hotAccounts is how many accounts the hot ledger drains credit: every
// group updates the same few rows.
const hotAccounts = 5

// drain preloads opts.DrainEvents pending events and times workers
// processes of binary from their start until every event is done.
func (b *bench) drain(ctx context.Context, d drainRun) (*DrainResult, error) {
	binary, handler, workers := d.binary, d.handler, d.workers
	n := b.opts.DrainEvents
	if err := b.resetTables(ctx); err != nil {
		return nil, err
	}
	r := &DrainResult{Handler: handler, Workers: workers, Events: n, Concurrency: d.concurrency, MaxConns: d.maxConns, GroupMaxEvents: d.groupMax, Accounts: d.accounts}
	t0 := time.Now()
	if err := preloadPending(ctx, b.pool, "msg_drain_"+d.name(), n, d.accounts); err != nil {
		return nil, err
	}
	r.PreloadSecs = time.Since(t0).Seconds()
	if err := settle(ctx, b.pool, "webhook_inbox", "river_job"); err != nil {
		return nil, err
	}
	var start time.Time
	if err := b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
		return nil, err
	}
	if err := b.statementsStart(ctx); err != nil {
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
		pc := procConfig{Handler: handler, Concurrency: d.concurrency, MaxConns: d.maxConns, GroupMaxEvents: d.groupMax}
		p, _, err := b.startWorkerWith(fmt.Sprintf("%s-%s-%d", binary, d.name(), i+1), binary, pc)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	drained, err := waitDrained(ctx, b.pool, procs, b.opts.DrainDeadline)
	cpu1 := takeCPU(b.postmaster, procs...)
	c, qerr := b.store.Count(ctx, nil)
	if qerr != nil {
		return nil, qerr
	}
	r.Done, r.Failed = c.Done, c.Failed
	if err := b.statementsEnd(ctx, "drain "+d.name(), r.Done); err != nil {
		return nil, err
	}
	// The drain ended with the last row processed (or now, if none was).
	end, qerr := lastProcessedAt(ctx, b.pool)
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
	progress("   %s: %d of %d events done (%d failed) in %.1f s: %.0f events/s; peak RSS %.0f MB",
		d.name(), r.Done, n, r.Failed, r.Seconds, r.EventsPerSec, r.PeakRSSMB)
	return r, err
}
