package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// runPhases runs the selected phases in order. A phase that fails is
// recorded and the run goes on, so one broken measurement does not hide the
// others.
func (b *bench) runPhases(ctx context.Context) {
	phases := []struct {
		name, title string
		run         func(context.Context) error
	}{
		{"abc", "(a) ceiling, (b) receiver with a transaction per delivery, (c) with group commit; interleaved", b.phaseABC},
		{"d", "(d) duplicate storm and 50 % duplicate mix", b.phaseDuplicates},
		{"e", "(e) River's no-op ceiling and worker drains", b.phaseDrain},
		{"take", "take A/B: the worker's take from each candidate inbox layout, interleaved", b.phaseTake},
		{"f", "(f) steady open-loop load with a worker", b.phaseSteady},
		{"storm", "storm: a replay storm with normal traffic, drained by 1 and 2 workers", b.phaseStorm},
		{"fair", "fair: one source's storm beside a quiet source on a queue of its own", b.phaseFair},
		{"scale", "scale: (c) again with processed rows in the inbox", b.phaseScale},
	}
	for _, p := range phases {
		selected := b.opts.Phases[p.name]
		if p.name == "abc" {
			selected = countPhases(b.opts.Phases, "a", "b", "c") > 0
		}
		if !selected || ctx.Err() != nil {
			continue
		}
		progress("== %s", p.title)
		start := time.Now()
		err := p.run(ctx)
		b.report.PhaseSeconds[p.name] = time.Since(start).Seconds()
		if err != nil {
			b.failed = true
			b.report.Errors = append(b.report.Errors, fmt.Sprintf("(%s): %v", p.name, err))
			progress("phase %s failed: %v", p.name, err)
		}
	}
}

// unique returns deliveries of new events, ids prefixed by prefix.
func unique(prefix string) func(int, int64) Delivery {
	return func(_ int, seq int64) Delivery {
		return Delivery{EventID: fmt.Sprintf("msg_%s_%09d", prefix, seq), Seq: seq}
	}
}

// closedLoop returns a closed-loop load of that many clients, each delivering next.
func (b *bench) closedLoop(url string, clients int, next func(int, int64) Delivery) *LoadSpec {
	return &LoadSpec{
		URL: url, Clients: clients, Warmup: b.opts.Warmup, Duration: b.opts.Window,
		MaxRequests: b.opts.MaxRequests, Next: next, AckTimeout: ackTimeout,
	}
}

// load runs spec, measuring the CPU of procs and the server over its
// measured window, and adds its failures to the run's totals.
func (b *bench) load(ctx context.Context, spec *LoadSpec, procs ...*Proc) (*HTTPFigures, *LoadResult) {
	res, cpu := b.measured(ctx, spec.Warmup, procs, func() *LoadResult { return runLoad(ctx, spec) })
	f := figures(spec.Clients, spec.Rate, res, cpu)
	b.report.HTTPTotals.add(res)
	progress("   %d clients%s: %.0f new/s, %.0f ok/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms (%d requests, %d non-2xx, %d errors)",
		spec.Clients, rateText(spec.Rate), f.NewPerSec, f.OKPerSec, f.Latency.P50Ms, f.Latency.P99Ms, f.Latency.P999Ms,
		f.Requests, f.Non2xx, f.Errors)
	return f, res
}

// measured runs a load whose measured window starts after warmup, and
// returns its result with the CPU that procs and the server used in that
// window.
func (b *bench) measured(ctx context.Context, warmup time.Duration, procs []*Proc, run func() *LoadResult) (*LoadResult, *CPUUse) {
	cpu0 := make(chan CPUSnapshot, 1)
	measureFrom := time.Now().Add(warmup)
	go func() { cpu0 <- takeCPUAt(ctx, measureFrom, b.postmaster, procs...) }()
	res := run()
	return res, cpuSince(<-cpu0, takeCPU(b.postmaster, procs...), res.New)
}

func rateText(rate float64) string {
	if rate <= 0 {
		return ""
	}
	return fmt.Sprintf(" (open loop at %.0f/s)", rate)
}

// phaseDuplicates measures (d) on a group-commit receiver of its own: a
// storm of one event from every client, then a half-duplicate mix, and
// checks that neither added a row or a job beyond the new events.
func (b *bench) phaseDuplicates(ctx context.Context) error {
	p, url, err := b.startReceiver(ctx, "receiver-d", procConfig{})
	if err != nil {
		return err
	}
	defer b.release(p)
	const seeds = 1000
	seed := func(_ int, seq int64) Delivery {
		if seq == seeds {
			return Delivery{EventID: "msg_storm", Seq: seq}
		}
		return Delivery{EventID: fmt.Sprintf("msg_dseed_%06d", seq), Seq: seq}
	}
	seeded := runLoad(ctx, &LoadSpec{URL: url, Clients: 8, Duration: time.Minute, MaxRequests: seeds + 1, Next: seed, AckTimeout: ackTimeout})
	if seeded.New != seeds+1 {
		return fmt.Errorf("seeding: %d of %d events were new (%v, first error %q)", seeded.New, seeds+1, seeded.Status, seeded.FirstError)
	}
	before, err := tally(ctx, b.pool)
	if err != nil {
		return err
	}
	d := &DupResult{}
	b.report.Duplicates = d
	progress("   storm: one event from %d clients", b.opts.Clients)
	var stormRes, mixRes *LoadResult
	d.Storm, stormRes = b.load(ctx, b.closedLoop(url, b.opts.Clients, func(int, int64) Delivery {
		return Delivery{EventID: "msg_storm", Seq: seeds, Dup: true}
	}), p)
	progress("   mix: half the clients send new events, half resend delivered ones")
	mix := func(client int, seq int64) Delivery {
		if client%2 == 0 {
			return Delivery{EventID: fmt.Sprintf("msg_dmix_%09d", seq), Seq: seq}
		}
		i := seq % seeds
		return Delivery{EventID: fmt.Sprintf("msg_dseed_%06d", i), Seq: i, Dup: true}
	}
	d.Mix, mixRes = b.load(ctx, b.closedLoop(url, b.opts.Clients, mix), p)
	after, err := tally(ctx, b.pool)
	if err != nil {
		return err
	}
	w := mixRes.Window
	d.StormDupPerSec = perSec(d.Storm.Duplicates, time.Duration(d.Storm.WindowSeconds*float64(time.Second)))
	d.MixNewPerSec, d.MixDupPerSec = perSec(mixRes.ByClass[0].OK, w), perSec(mixRes.ByClass[1].OK, w)
	d.MixNewLatency, d.MixDupLatency = mixRes.ByClass[0].Latency.Summary(), mixRes.ByClass[1].Latency.Summary()
	// Warm-up requests count here: they committed rows too.
	newEvents := stormRes.SentNew + mixRes.SentNew
	d.ExtraRows = after.Rows - before.Rows - newEvents
	d.ExtraJobs = after.Jobs - before.Jobs - newEvents
	// Exact per-request counts: each new-class 2xx reported one new event,
	// each duplicate-class 2xx one duplicate.
	d.CountsExact = d.Storm.New == 0 && d.Storm.Duplicates == d.Storm.OK &&
		d.Mix.New == mixRes.ByClass[0].OK && d.Mix.Duplicates == mixRes.ByClass[1].OK
	return nil
}

// phaseSteady measures (f): ack latency under an open-loop load at a
// fraction of the pipeline's maximum with a noop worker running, then each
// event's age at done.
//
// The maximum is that of the whole pipeline, since the worker shares the
// machine's cores with the receiver and must keep up for a load to be
// steady: every event costs the CPU of its claim and of its processing, so
// the pipeline does at most 1 / (1/c + 1/e) events per second, with c the
// receiver's maximum (c) and e the noop drain of one worker (e). Without
// (e) in the run, (c) alone is the basis, and the load may be an overload.
func (b *bench) phaseSteady(ctx context.Context) error {
	c := b.report.GroupCommit
	if c == nil || c.Many == nil || c.Many.NewPerSec <= 0 {
		return errors.New("needs (c)'s maximum; run phase c too")
	}
	if err := b.resetTables(ctx); err != nil {
		return err
	}
	s := &SteadyResult{Fraction: b.opts.SteadyFraction, Basis: "(c)", Max: c.Many.NewPerSec}
	if d := b.report.drain("noop", 1); d != nil && d.EventsPerSec > 0 {
		s.Basis = "pipeline: 1/(1/(c) + 1/(e) noop drain)"
		s.Max = 1 / (1/c.Many.NewPerSec + 1/d.EventsPerSec)
	}
	rate := b.opts.SteadyFraction * s.Max
	s.Rate = rate
	progress("   maximum %.0f/s from %s; steady load %.0f/s", s.Max, s.Basis, rate)
	b.report.Steady = s
	recv, url, err := b.startReceiver(ctx, "receiver-f", procConfig{})
	if err != nil {
		return err
	}
	defer b.release(recv)
	w, readyURL, err := b.startWorker("worker-f", "worker", "noop")
	if err != nil {
		return err
	}
	defer b.release(w)
	// Unlike a drain, the steady load starts on a running worker, so that
	// no event's age includes the worker's start-up.
	if err := w.waitReady(ctx, readyURL, 30*time.Second); err != nil {
		return err
	}
	spec := &LoadSpec{
		URL: url, Clients: b.opts.SteadyInflight, Rate: rate, Warmup: b.opts.Warmup, Duration: b.opts.SteadyWindow,
		MaxRequests: b.opts.MaxRequests, Next: unique("f"), AckTimeout: ackTimeout,
	}
	var res *LoadResult
	measureFrom := time.Now().Add(spec.Warmup)
	s.Ack, res = b.load(ctx, spec, recv, w)
	// The worker may trail the load: wait for it, bounded.
	loadEnd := time.Now()
	drained, err := waitDrained(ctx, b.pool, []*Proc{w}, b.opts.DrainDeadline)
	if err != nil {
		return err
	}
	s.DrainAfterLoadSecs = time.Since(loadEnd).Seconds()
	s.Drained = drained
	ages, err := doneAges(ctx, b.pool, measureFrom)
	if err != nil {
		return fmt.Errorf("event age: %w", err)
	}
	s.Done, s.AgeP50Ms, s.AgeP99Ms, s.AgeMaxMs = ages.Done, ms(ages.P50), ms(ages.P99), ms(ages.Max)
	s.Accepted = res.SentNew
	progress("   event age at done: p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d of %d events done %.1f s after the load ended)",
		s.AgeP50Ms, s.AgeP99Ms, s.AgeMaxMs, s.Done, s.Accepted, s.DrainAfterLoadSecs)
	return nil
}

// phaseScale measures (c) on a full inbox against (c) on an empty one,
// interleaved like (a), (b) and (c): the benchmark database gets the
// preloaded processed rows, a second database of the same server stays
// empty, a group-commit receiver runs on each, and their slices alternate,
// so that drift on a shared machine touches both alike.
func (b *bench) phaseScale(ctx context.Context) error {
	if err := b.resetTables(ctx); err != nil {
		return err
	}
	s := &ScaleResult{Rows: b.opts.ScaleRows}
	b.report.Scale = s
	t0 := time.Now()
	if err := copyDoneRows(ctx, b.pool, b.opts.ScaleRows); err != nil {
		return err
	}
	s.CopySecs = time.Since(t0).Seconds()
	t1 := time.Now()
	if err := settle(ctx, b.pool, "webhook_inbox"); err != nil {
		return err
	}
	s.SettleSecs = time.Since(t1).Seconds()
	size, err := inboxBytes(ctx, b.pool)
	if err != nil {
		return err
	}
	s.TableBytes = size
	progress("   %d processed rows copied in %.1f s, vacuumed in %.1f s; the inbox is %.0f MB with indexes",
		s.Rows, s.CopySecs, s.SettleSecs, mb(s.TableBytes))

	emptyName := b.dbName + "_empty"
	emptyURL, err := createDatabase(ctx, b.adminURL, emptyName)
	if err != nil {
		return err
	}
	defer func() {
		if err := dropDatabase(b.adminURL, emptyName); err != nil {
			progress("could not drop database %s: %v", emptyName, err)
		}
	}()
	if err := b.migrateDB(ctx, emptyURL); err != nil {
		return err
	}

	runs := []*receiverUnderTest{
		{phase: "scale0", pc: procConfig{DatabaseURL: emptyURL}, out: &s.Empty},
		{phase: "scale", pc: procConfig{}, out: &s.Full},
	}
	var all []*measurement
	for _, rv := range runs {
		if err := b.startUnderTest(ctx, rv); err != nil {
			return err
		}
		defer b.release(rv.proc)
		all = append(all, rv.ms[:]...)
	}
	b.interleave(ctx, all)
	for _, rv := range runs {
		b.collectRun(rv)
	}
	return nil
}
