package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hookinbox/hookinbox/internal/testkit/pgbouncer"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// QueryModeResult is one row of measurement (q): the receiver's ingest and
// a noop worker's drain with one database.query_mode, reaching PostgreSQL
// directly or through PgBouncer in transaction pooling mode.
type QueryModeResult struct {
	// Path is "direct" or "pgbouncer".
	Path      string       `json:"path"`
	QueryMode string       `json:"query_mode"`
	Ingest    *HTTPFigures `json:"ingest,omitempty"`
	Drain     *DrainResult `json:"drain,omitempty"`
}

func (q *QueryModeResult) label() string { return q.Path + " " + q.QueryMode }

// queryModeVariant is what one row of (q) runs with.
type queryModeVariant struct {
	result *QueryModeResult
	pc     procConfig
}

// phaseQueryModes measures (q): what database.query_mode costs, and what
// PgBouncer in transaction pooling mode costs on top. The group-commit
// receiver's ingest at --clients clients is measured for each variant,
// interleaved like (a)–(c); then a noop worker drains an eighth of
// --drain-events with each, twice, in opposite orders. Directly: cache_statement (the default), exec
// and simple_protocol; through PgBouncer (when installed): exec and
// simple_protocol, with database.pooler: transaction, so the worker polls.
func (b *bench) phaseQueryModes(ctx context.Context) error {
	variants := []*queryModeVariant{}
	add := func(path, mode string, pc procConfig) {
		pc.QueryMode = mode
		variants = append(variants, &queryModeVariant{result: &QueryModeResult{Path: path, QueryMode: mode}, pc: pc})
	}
	for _, mode := range []string{"cache_statement", "exec", "simple_protocol"} {
		add("direct", mode, procConfig{})
	}
	if bin := pgbouncer.Find(); bin == "" {
		progress("   pgbouncer is not installed: measuring the direct connections only")
	} else {
		bouncer, err := startPgBouncer(ctx, bin, b.adminURL, b.dir)
		if err != nil {
			return err
		}
		defer bouncer.stop()
		bouncedURL, err := bouncer.URL(b.dbURL)
		if err != nil {
			return err
		}
		for _, mode := range []string{"exec", "simple_protocol"} {
			add("pgbouncer", mode, procConfig{DatabaseURL: bouncedURL, Pooler: config.PoolerTransaction})
		}
	}
	if err := b.resetTables(ctx); err != nil {
		return err
	}
	var ms []*measurement
	for _, v := range variants {
		name := "q-" + v.result.Path + "-" + v.result.QueryMode
		p, url, err := b.startReceiver(ctx, "receiver-"+name, v.pc, "")
		if err != nil {
			return err
		}
		defer b.release(p)
		m := b.receiverMeasurement(name, url, b.opts.Clients, p)
		m.label = "(q) " + v.result.label()
		ms = append(ms, m)
	}
	b.interleave(ctx, ms)
	for i, v := range variants {
		v.result.Ingest = figures(b.opts.Clients, 0, ms[i].total, ms[i].cpu)
		b.report.HTTPTotals.add(ms[i].total)
		b.report.QueryModes = append(b.report.QueryModes, v.result)
	}
	// Drains cannot share a window as loads do; two rounds in opposite
	// orders spread a neighbour's drift over every variant instead.
	const rounds = 2
	n := max(1, b.opts.DrainEvents/4/rounds)
	for r := range rounds {
		order := slices.Clone(variants)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d, err := b.queryModeDrain(ctx, v, n)
			if err != nil {
				return err
			}
			v.result.Drain = mergeDrain(v.result.Drain, d)
		}
	}
	return nil
}

// mergeDrain adds drain d to the total of earlier rounds (nil before the
// first).
func mergeDrain(total, d *DrainResult) *DrainResult {
	if total == nil {
		return d
	}
	total.Events += d.Events
	total.Done += d.Done
	total.Failed += d.Failed
	total.Seconds += d.Seconds
	total.EventsPerSec = perSec(total.Done, time.Duration(total.Seconds*float64(time.Second)))
	total.DeadlineHit = total.DeadlineHit || d.DeadlineHit
	total.PreloadSecs += d.PreloadSecs
	total.PeakRSSMB = max(total.PeakRSSMB, d.PeakRSSMB)
	total.CPU = mergeCPU(total.CPU, d.CPU)
	return total
}

// queryModeDrain preloads n pending events and times one noop worker of
// v's settings draining them.
func (b *bench) queryModeDrain(ctx context.Context, v *queryModeVariant, n int) (*DrainResult, error) {
	if err := b.resetTables(ctx); err != nil {
		return nil, err
	}
	r := &DrainResult{Handler: "noop", Workers: 1, Events: n}
	t0 := time.Now()
	name := "q-" + v.result.Path + "-" + v.result.QueryMode
	if err := preloadPending(ctx, b.pool, b.store, "msg_"+name, n, 0); err != nil {
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
	pc := v.pc
	pc.Handler, pc.Concurrency = "noop", b.opts.WorkerConcurrency
	p, _, err := b.startWorkerWith("worker-"+name, "worker", "", pc)
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.stop(p) }()
	drained, err := waitDrained(ctx, b.store, []*Proc{p}, b.opts.DrainDeadline)
	if err != nil {
		return nil, err
	}
	cpu1 := takeCPU(b.postmaster, p)
	c, err := b.store.Count(ctx, nil)
	if err != nil {
		return nil, err
	}
	r.Done, r.Failed = c.Done, c.Failed
	end, err := b.store.LastProcessedAt(ctx)
	if err == nil && end.IsZero() {
		err = b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&end)
	}
	if err != nil {
		return nil, err
	}
	r.Seconds = end.Sub(start).Seconds()
	r.EventsPerSec = perSec(r.Done, end.Sub(start))
	r.CPU = cpuSince(cpu0, cpu1, r.Done)
	r.DeadlineHit = !drained
	rss, _ := p.Sample()
	r.PeakRSSMB = mb(rss)
	progress("   (q) drain, %s: %d of %d events done (%d failed) in %.1f s: %.0f events/s",
		v.result.label(), r.Done, n, r.Failed, r.Seconds, r.EventsPerSec)
	return r, nil
}

// printQueryModes adds (q)'s rows to t: each variant's ingest, then its
// drain, with the ratio to the direct cache_statement row.
func (r *Report) printQueryModes(t *table) {
	var base *QueryModeResult
	for _, q := range r.QueryModes {
		if q.Path == "direct" && q.QueryMode == "cache_statement" {
			base = q
		}
	}
	ratio := func(v, of float64) string {
		if of <= 0 {
			return ""
		}
		return fmt.Sprintf("%.2f× direct cache_statement; ", v/of)
	}
	for _, q := range r.QueryModes {
		if f := q.Ingest; f != nil {
			note := failNote(f) + cpuNote(f.CPU, 0)
			if base != nil && base.Ingest != nil {
				note = ratio(f.NewPerSec, base.Ingest.NewPerSec) + note
			}
			t.row(fmt.Sprintf("(q) receiver ingest, %s, %d clients", q.label(), f.Clients), thousands(f.NewPerSec),
				f2(f.Latency.P50Ms), f2(f.Latency.P99Ms), f2(f.Latency.P999Ms), note)
		}
	}
	for _, q := range r.QueryModes {
		if d := q.Drain; d != nil {
			note := fmt.Sprintf("%.1f s, %d failed; %s", d.Seconds, d.Failed, cpuNote(d.CPU, 0))
			if d.DeadlineHit {
				note = fmt.Sprintf("deadline: %d of %d done; ", d.Done, d.Events) + note
			}
			if base != nil && base.Drain != nil {
				note = ratio(d.EventsPerSec, base.Drain.EventsPerSec) + note
			}
			t.row(fmt.Sprintf("(q) drain noop, %s, %s events", q.label(), thousands(float64(d.Events))),
				thousands(d.EventsPerSec), "", "", "", note)
		}
	}
}
