package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// measurement is one figure of the interleaved phases (a), (b) and (c): a
// ceiling concurrency, or a receiver at one client count.
type measurement struct {
	label string
	// procs are the subprocesses whose CPU the measurement accounts.
	procs []*Proc
	// run measures one slice: a warm-up, then window.
	run   func(ctx context.Context, warmup, window time.Duration) *LoadResult
	total *LoadResult
	cpu   *CPUUse
}

// interleave runs every measurement in opts.Rounds rounds of one slice
// each, reversing the order every other round, so that a neighbour's burst
// of load or a slow drift on a shared machine touches every figure alike and
// the ratios between them stay fair. The first slice of each measurement
// warms up for opts.Warmup, later ones briefly.
func (b *bench) interleave(ctx context.Context, ms []*measurement) {
	// Totals exist from the start, so that a run cut short (Ctrl-C) still
	// reports, with what it measured.
	for _, m := range ms {
		m.total = &LoadResult{Status: map[int]int64{}}
	}
	rounds := max(1, b.opts.Rounds)
	window := b.opts.Window / time.Duration(rounds)
	for r := range rounds {
		order := slices.Clone(ms)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, m := range order {
			if ctx.Err() != nil {
				return
			}
			warmup := b.opts.Warmup
			if r > 0 {
				warmup = min(warmup, 300*time.Millisecond)
			}
			res, cpu := b.measured(ctx, warmup, m.procs, func() *LoadResult { return m.run(ctx, warmup, window) })
			m.total.add(res)
			m.cpu = mergeCPU(m.cpu, cpu)
		}
	}
	for _, m := range ms {
		t, l := m.total, m.total.Latency.Summary()
		progress("   %s: %.0f new/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms (%d requests, %d non-2xx, %d errors)",
			m.label, t.NewPerSec(), l.P50Ms, l.P99Ms, l.P999Ms, t.Requests, t.Non2xx(), t.Errors)
	}
}

// phaseABC measures (a), (b) and (c), whichever are selected, interleaved:
// the ceiling at each concurrency in-process, and the two receivers, both
// running throughout, at one client and at many.
func (b *bench) phaseABC(ctx context.Context) error {
	var ceilings, all []*measurement
	if b.opts.Phases["a"] {
		for _, conc := range b.opts.CeilingConc {
			c, err := newCeiling(ctx, b.dbURL, conc, b.opts.MaxRequests)
			if err != nil {
				return err
			}
			defer c.close()
			ceilings = append(ceilings, &measurement{label: fmt.Sprintf("(a) %d conns", conc), run: c.run})
		}
	}
	all = append(all, ceilings...)
	n := b.opts.PerRequestConns
	recvs := []*receiverUnderTest{
		{phase: "b", pc: procConfig{MaxConns: n, BatchMaxEvents: 1, BatchFlushers: n}, out: &b.report.PerRequest},
		{phase: "c", pc: procConfig{}, out: &b.report.GroupCommit},
	}
	for _, rv := range recvs {
		if !b.opts.Phases[rv.phase] {
			continue
		}
		if err := b.startUnderTest(ctx, rv); err != nil {
			return err
		}
		defer b.release(rv.proc)
		all = append(all, rv.ms[:]...)
	}
	if err := b.statementsStart(ctx); err != nil {
		return err
	}
	b.interleave(ctx, all)
	if err := b.statementsEnd(ctx, "(a), (b) and (c)", 0); err != nil {
		return err
	}

	for i, m := range ceilings {
		t := m.total
		b.report.Ceiling = append(b.report.Ceiling, &CeilingResult{
			Concurrency: b.opts.CeilingConc[i], EventsPerSec: t.NewPerSec(), Latency: t.Latency.Summary(),
			Errors: t.Errors, CPU: m.cpu,
		})
	}
	for _, rv := range recvs {
		if rv.proc == nil {
			continue
		}
		b.collectRun(rv)
	}
	return nil
}

// receiverUnderTest is a receiver of phase (b) or (c) and its two
// measurements.
type receiverUnderTest struct {
	phase string
	pc    procConfig
	out   **ReceiverRun
	proc  *Proc
	ms    [2]*measurement
}

// startUnderTest starts rv's receiver and prepares its two measurements, at
// one client and at many. The caller stops rv.proc.
func (b *bench) startUnderTest(ctx context.Context, rv *receiverUnderTest) error {
	p, url, err := b.startReceiver(ctx, "receiver-"+rv.phase, rv.pc)
	if err != nil {
		return err
	}
	rv.proc = p
	for i, clients := range []int{1, b.opts.Clients} {
		rv.ms[i] = b.receiverMeasurement(rv.phase, url, clients, p)
	}
	return nil
}

// collectRun turns rv's interleaved measurements into its report entry.
func (b *bench) collectRun(rv *receiverUnderTest) {
	run := &ReceiverRun{Config: rv.pc.describe()}
	run.One = figures(1, 0, rv.ms[0].total, rv.ms[0].cpu)
	run.Many = figures(b.opts.Clients, 0, rv.ms[1].total, rv.ms[1].cpu)
	for _, m := range rv.ms {
		b.report.HTTPTotals.add(m.total)
	}
	rss, _ := rv.proc.Sample()
	run.PeakRSSMB = mb(rss)
	*rv.out = run
}

// receiverMeasurement measures the receiver at url with clients closed-loop
// clients, each slice continuing the event numbering so ids stay unique.
func (b *bench) receiverMeasurement(phase, url string, clients int, p *Proc) *measurement {
	var seq int64
	next := unique(fmt.Sprintf("%s%d", phase, clients))
	return &measurement{
		label: fmt.Sprintf("(%s) %d client%s", phase, clients, plural(clients)),
		procs: []*Proc{p},
		run: func(ctx context.Context, warmup, window time.Duration) *LoadResult {
			base := seq
			spec := b.closedLoop(url, clients, func(client int, s int64) Delivery { return next(client, base+s) })
			spec.Warmup, spec.Duration = warmup, window
			res := runLoad(ctx, spec)
			seq += res.Sent
			return res
		},
	}
}

// countPhases counts how many of names are selected.
func countPhases(selected map[string]bool, names ...string) int {
	n := 0
	for _, name := range names {
		if selected[name] {
			n++
		}
	}
	return n
}
