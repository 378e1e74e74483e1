package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The replay storm (issue 11): a provider resends a backlog at full speed,
// half of it events the inbox already has, while the usual traffic keeps
// arriving at a fraction of the receiver's maximum. It measures how long
// the storm takes to drain with 1 and with 2 worker processes, and what the
// normal traffic sees meanwhile: its ack latency and its events' age at
// done (received → processed).

// stormFlags declares the storm's flags on fs.
func stormFlags(fs *flag.FlagSet, o *options) {
	fs.IntVar(&o.StormDeliveries, "storm-deliveries", 100_000, "storm: deliveries the replay storm resends at full speed, half of them duplicates")
	fs.Float64Var(&o.StormFraction, "storm-fraction", 0.1, "storm: the normal traffic's rate during the storm, as a fraction of (c)'s 64-client maximum")
	fs.DurationVar(&o.StormDeadline, "storm-deadline", 150*time.Second, "storm: stop waiting for a storm to be sent and drained after this long")
	fs.DurationVar(&o.StormBaseline, "storm-baseline", 10*time.Second, "storm: the normal traffic's window with no storm, before each storm")
}

// StormResult is one replay storm, drained by Workers worker processes.
type StormResult struct {
	Workers int `json:"workers"`
	// Deliveries is the storm's size; half of them are duplicates of
	// events preloaded as done before it.
	Deliveries int `json:"deliveries"`
	// Send is the storm's own load: closed loop, --clients clients.
	Send *HTTPFigures `json:"send"`
	// SendSecs is how long sending the storm took; DrainSecs from its
	// first request to its last new event done.
	SendSecs  float64 `json:"send_seconds"`
	DrainSecs float64 `json:"drain_seconds"`
	// Drained is false when --storm-deadline passed first.
	Drained bool `json:"drained"`
	// NormalRate is the normal traffic's open-loop rate, Normal its acks
	// during the storm (from its first request until it drained).
	NormalRate float64      `json:"normal_rate"`
	Normal     *HTTPFigures `json:"normal"`
	// NormalBaseline is the normal traffic with no storm, before it;
	// NormalDrain while workers drain a backlog of Backlog events (the
	// storm's new events, preloaded as pending) and no storm is sent (the
	// drain only), which took DrainOnlySecs.
	NormalBaseline *HTTPFigures `json:"normal_baseline"`
	NormalDrain    *HTTPFigures `json:"normal_drain_only,omitempty"`
	Backlog        int          `json:"backlog"`
	BacklogDrained bool         `json:"backlog_drained"`
	DrainOnlySecs  float64      `json:"drain_only_seconds"`
	// NormalDone counts the normal events done; the ages are theirs.
	NormalDone     int64   `json:"normal_done"`
	NormalAgeP50Ms float64 `json:"normal_age_p50_ms"`
	NormalAgeP99Ms float64 `json:"normal_age_p99_ms"`
	NormalAgeMaxMs float64 `json:"normal_age_max_ms"`
	// ExtraRows and ExtraJobs count rows and jobs beyond the new events
	// the receiver acknowledged (0 when nothing was written twice).
	ExtraRows int64 `json:"extra_rows"`
	ExtraJobs int64 `json:"extra_jobs"`
	// NewExact holds when the storm's answers counted exactly its new
	// events as new and its duplicates as duplicates.
	NewExact bool     `json:"new_exact"`
	CPU      *CPUUse  `json:"cpu,omitempty"`
	Errors   []string `json:"errors,omitempty"`
}

// phaseStorm runs the replay storm with 1 and with 2 noop workers.
func (b *bench) phaseStorm(ctx context.Context) error {
	c := b.report.GroupCommit
	if c == nil || c.Many == nil || c.Many.NewPerSec <= 0 {
		return errors.New("needs (c)'s maximum for the normal traffic's rate; run phase c too")
	}
	rate := b.opts.StormFraction * c.Many.NewPerSec
	var errs []error
	for _, workers := range []int{1, 2} {
		r, err := b.storm(ctx, workers, rate)
		if r != nil {
			b.report.Storms = append(b.report.Storms, r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%d worker(s): %w", workers, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// storm runs one replay storm drained by workers noop worker processes,
// then the drain of a backlog of the storm's new events.
func (b *bench) storm(ctx context.Context, workers int, rate float64) (*StormResult, error) {
	n := b.opts.StormDeliveries
	r := &StormResult{Workers: workers, Deliveries: n, NormalRate: rate}
	if err := b.resetTables(ctx); err != nil {
		return nil, err
	}
	// The storm resends deliveries of two kinds, alternating: one of the
	// events preloaded as done (a duplicate), then one the inbox never got.
	dupPrefix, newPrefix, normalPrefix := fmt.Sprintf("msg_s%dd", workers), fmt.Sprintf("msg_s%dn", workers), fmt.Sprintf("msg_s%dt", workers)
	backlogPrefix := fmt.Sprintf("msg_s%db", workers)
	if err := copyDoneWithPrefix(ctx, b.pool, dupPrefix, (n+1)/2); err != nil {
		return nil, err
	}
	if err := settle(ctx, b.pool, "webhook_inbox"); err != nil {
		return nil, err
	}
	before, err := tally(ctx, b.pool)
	if err != nil {
		return nil, err
	}
	recv, url, err := b.startReceiver(ctx, fmt.Sprintf("receiver-storm%d", workers), procConfig{})
	if err != nil {
		return nil, err
	}
	defer b.release(recv)
	ws, err := b.startStormWorkers(ctx, workers, "")
	for _, w := range ws {
		defer b.release(w)
	}
	if err != nil {
		return nil, err
	}
	procs := append([]*Proc{recv}, ws...)
	progress("   storm, %d worker%s: %d deliveries (half duplicates) from %d clients, normal traffic at %.0f/s",
		workers, plural(workers), n, b.opts.Clients, rate)

	// The normal traffic, each window an open loop of its own at the same
	// rate: alone, then during the storm until it drained.
	normalLoad := func(window string, d time.Duration, stop <-chan struct{}) *LoadSpec {
		return &LoadSpec{
			URL: url, Clients: b.opts.SteadyInflight, Rate: rate, Duration: d,
			MaxRequests: b.opts.MaxRequests, Next: unique(normalPrefix[4:] + window), AckTimeout: ackTimeout, Stop: stop,
		}
	}
	cpuBase := takeCPU(b.postmaster, procs...)
	baseRes := runLoad(ctx, normalLoad("b", b.opts.StormBaseline, nil))
	cpu0 := takeCPU(b.postmaster, procs...)
	r.NormalBaseline = figures(b.opts.SteadyInflight, rate, baseRes, cpuSince(cpuBase, cpu0, baseRes.OK()))
	b.report.HTTPTotals.add(baseRes)

	stop := make(chan struct{})
	normalDone := make(chan *LoadResult, 1)
	go func() { normalDone <- runLoad(ctx, normalLoad("i", b.opts.StormDeadline, stop)) }()
	start := time.Now()
	stormSpec := &LoadSpec{
		URL: url, Clients: b.opts.Clients, Duration: b.opts.StormDeadline, MaxRequests: int64(n), AckTimeout: ackTimeout,
		Next: func(_ int, seq int64) Delivery {
			if seq%2 == 0 {
				return Delivery{EventID: fmt.Sprintf("%s_%09d", dupPrefix, seq/2), Seq: seq / 2, Dup: true}
			}
			return Delivery{EventID: fmt.Sprintf("%s_%09d", newPrefix, seq/2), Seq: seq / 2}
		},
	}
	stormRes := runLoad(ctx, stormSpec)
	r.SendSecs = time.Since(start).Seconds()
	r.Send = figures(b.opts.Clients, 0, stormRes, nil)
	b.report.HTTPTotals.add(stormRes)
	progress("   storm sent in %.1f s: %.0f deliveries/s, %d new, %d duplicates, p99 %.1f ms (%d non-2xx, %d errors)",
		r.SendSecs, r.Send.OKPerSec, r.Send.New, r.Send.Duplicates, r.Send.Latency.P99Ms, r.Send.Non2xx, r.Send.Errors)

	r.Drained, err = b.waitPrefixDrained(ctx, newPrefix, ws, b.opts.StormDeadline-time.Since(start))
	cpu1 := takeCPU(b.postmaster, procs...)
	close(stop)
	normalRes := <-normalDone
	r.Normal = figures(normalLoad("", 0, nil).Clients, rate, normalRes, cpuSince(cpu0, cpu1, normalRes.OK()))
	b.report.HTTPTotals.add(normalRes)
	if err != nil {
		return r, err
	}
	stormAges, err := agesWithPrefix(ctx, b.pool, newPrefix)
	if err != nil {
		return r, err
	}
	if !stormAges.LastProcessed.IsZero() {
		r.DrainSecs = stormAges.LastProcessed.Sub(start).Seconds()
	}
	if !r.Drained {
		r.DrainSecs = time.Since(start).Seconds()
	}
	r.CPU = cpuSince(cpu0, cpu1, stormAges.Done)
	// The normal events still pending when the storm drained are waited
	// for, so that every one of them has an age, and counted.
	if _, err := b.waitPrefixDrained(ctx, normalPrefix, ws, b.opts.DrainDeadline); err != nil {
		return r, err
	}
	after, err := tally(ctx, b.pool)
	if err != nil {
		return r, err
	}
	accepted := stormRes.SentNew + baseRes.SentNew + normalRes.SentNew
	r.ExtraRows, r.ExtraJobs = after.Rows-before.Rows-accepted, after.Jobs-before.Jobs-accepted
	r.NewExact = stormRes.New == int64(n/2) && stormRes.Duplicates == int64((n+1)/2)
	progress("   storm drained %v in %.1f s; normal traffic: %.0f ok/s, ack p99 %.1f ms (no storm %.1f ms); extra rows %d, jobs %d",
		r.Drained, r.DrainSecs, r.Normal.OKPerSec, r.Normal.Latency.P99Ms, r.NormalBaseline.Latency.P99Ms, r.ExtraRows, r.ExtraJobs)

	if err := b.drainOnly(ctx, r, ws, procs[:1], backlogPrefix, normalPrefix, normalLoad); err != nil {
		return r, err
	}
	normalAges, err := agesWithPrefix(ctx, b.pool, normalPrefix)
	if err != nil {
		return r, err
	}
	r.NormalDone = normalAges.Done
	r.NormalAgeP50Ms, r.NormalAgeP99Ms, r.NormalAgeMaxMs = ms(normalAges.P50), ms(normalAges.P99), ms(normalAges.Max)
	return r, nil
}

// startStormWorkers starts workers noop worker processes, each named with
// suffix, and waits until they are ready.
func (b *bench) startStormWorkers(ctx context.Context, workers int, suffix string) ([]*Proc, error) {
	var ws []*Proc
	for i := range workers {
		w, readyURL, err := b.startWorker(fmt.Sprintf("worker-storm%d-%d%s", workers, i+1, suffix), "worker", "noop")
		if err != nil {
			return ws, err
		}
		ws = append(ws, w)
		if err := w.waitReady(ctx, readyURL, 30*time.Second); err != nil {
			return ws, err
		}
	}
	return ws, nil
}

// drainOnly measures what the drain alone costs the normal traffic: the
// storm's workers stop, a backlog of the storm's new events (half its
// deliveries) is preloaded as pending, and fresh workers drain it while
// the normal traffic runs, with no storm sent to the receiver. ws are
// stopped (and replaced by the fresh ones, stopped on return).
func (b *bench) drainOnly(ctx context.Context, r *StormResult, ws, recv []*Proc, prefix, normalPrefix string,
	normalLoad func(string, time.Duration, <-chan struct{}) *LoadSpec,
) error {
	for _, w := range ws {
		if err := b.stop(w); err != nil {
			return err
		}
	}
	r.Backlog = r.Deliveries / 2
	if err := preloadPending(ctx, b.pool, prefix, r.Backlog, 0); err != nil {
		return err
	}
	if err := settle(ctx, b.pool, "webhook_inbox", "river_job"); err != nil {
		return err
	}
	fresh, err := b.startStormWorkers(ctx, r.Workers, "-backlog")
	for _, w := range fresh {
		defer b.release(w)
	}
	if err != nil {
		return err
	}
	procs := append(append([]*Proc(nil), recv...), fresh...)
	stop := make(chan struct{})
	done := make(chan *LoadResult, 1)
	cpu0 := takeCPU(b.postmaster, procs...)
	start := time.Now()
	go func() { done <- runLoad(ctx, normalLoad("d", b.opts.StormDeadline, stop)) }()
	r.BacklogDrained, err = b.waitPrefixDrained(ctx, prefix, fresh, b.opts.StormDeadline)
	cpu1 := takeCPU(b.postmaster, procs...)
	close(stop)
	res := <-done
	b.report.HTTPTotals.add(res)
	r.DrainOnlySecs = time.Since(start).Seconds()
	if ages, aerr := agesWithPrefix(ctx, b.pool, prefix); aerr == nil && !ages.LastProcessed.IsZero() && r.BacklogDrained {
		r.DrainOnlySecs = ages.LastProcessed.Sub(start).Seconds()
	}
	r.NormalDrain = figures(normalLoad("", 0, nil).Clients, r.NormalRate, res, cpuSince(cpu0, cpu1, int64(r.Backlog)))
	if err != nil {
		return err
	}
	// The normal events received last are waited for too.
	if _, err := b.waitPrefixDrained(ctx, normalPrefix, fresh, b.opts.DrainDeadline); err != nil {
		return err
	}
	progress("   backlog of %d drained %v in %.1f s (%.0f events/s) with no storm sent; normal traffic ack p99 %.1f ms (no storm %.1f ms)",
		r.Backlog, r.BacklogDrained, r.DrainOnlySecs, float64(r.Backlog)/r.DrainOnlySecs, r.NormalDrain.Latency.P99Ms, r.NormalBaseline.Latency.P99Ms)
	return nil
}

// p99OrNone formats f's ack p99, or "—" for a window not measured.
func p99OrNone(f *HTTPFigures) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f ms", f.Latency.P99Ms)
}

// waitPrefixDrained polls until no row of prefix is pending (true), or
// until deadline passes (false). It fails when a worker exits.
func (b *bench) waitPrefixDrained(ctx context.Context, prefix string, workers []*Proc, deadline time.Duration) (bool, error) {
	pending := func(ctx context.Context) (bool, error) { return anyPending(ctx, b.pool, prefix) }
	return waitNonePending(ctx, pending, workers, deadline, 100*time.Millisecond)
}

// copyDoneWithPrefix bulk-loads n processed events named prefix_<seq>, as
// the storm's deliveries with Seq seq name them, received an hour ago.
func copyDoneWithPrefix(ctx context.Context, pool *pgxpool.Pool, prefix string, n int) error {
	received := time.Now().Add(-time.Hour)
	return copyDone(ctx, pool, n, "the storm's duplicates",
		func(seq int64) string { return fmt.Sprintf("%s_%09d", prefix, seq) },
		func(int64) time.Time { return received })
}

// printStorms adds the storm's rows to the table.
func (r *Report) printStorms(t *table) {
	for _, s := range r.Storms {
		note := fmt.Sprintf("sent in %.1f s at %s/s (p99 %.0f ms); extra rows %d, jobs %d", s.SendSecs,
			thousands(s.Send.OKPerSec), s.Send.Latency.P99Ms, s.ExtraRows, s.ExtraJobs)
		if !s.Drained {
			note = "deadline hit; " + note
		}
		if s.CPU != nil {
			note += "; " + cpuNote(s.CPU, 0)
		}
		w := fmt.Sprintf("%d worker%s", s.Workers, plural(s.Workers))
		t.row(fmt.Sprintf("storm: %s replayed (½ dup), %d noop %s: drain s", thousands(float64(s.Deliveries)), s.Workers, w[2:]),
			f1(s.DrainSecs), "", "", "", note)
		for _, win := range []struct {
			name string
			f    *HTTPFigures
		}{{"no storm", s.NormalBaseline}, {"storm (ingest and drain)", s.Normal}, {fmt.Sprintf("drain only (%s backlog)", thousands(float64(s.Backlog))), s.NormalDrain}} {
			label := fmt.Sprintf("storm: normal ack at %s/s, %s, %s", thousands(s.NormalRate), w, win.name)
			if win.f == nil {
				t.row(label, "", "", "", "", "not measured")
				continue
			}
			note := lateNote(win.f) + failNote(win.f)
			if win.f.CPU != nil {
				note += cpuNote(win.f.CPU, 0)
			}
			t.row(label, thousands(win.f.OKPerSec), f2(win.f.Latency.P50Ms), f2(win.f.Latency.P99Ms), f2(win.f.Latency.P999Ms), note)
		}
		if s.NormalDrain != nil && s.DrainOnlySecs > 0 {
			note := ""
			if !s.BacklogDrained {
				note = "deadline hit"
			}
			t.row(fmt.Sprintf("storm: backlog of %s drained with normal traffic, %s: drain s", thousands(float64(s.Backlog)), w),
				f1(s.DrainOnlySecs), "", "", "", fmt.Sprintf("%s events/s %s", thousands(float64(s.Backlog)/s.DrainOnlySecs), note))
		}
		t.row(fmt.Sprintf("storm: normal traffic event age, %s", w), "",
			f1(s.NormalAgeP50Ms), f1(s.NormalAgeP99Ms), "", fmt.Sprintf("max %.0f ms, %d events", s.NormalAgeMaxMs, s.NormalDone))
	}
}

// stormLiveFactor is the most the drain may raise the normal traffic's
// ack p99 over its value with no storm (issue 26).
const stormLiveFactor = 2.0

// judgeStorms adds the storm's figures to the targets: zero extra rows and
// jobs (issue 11); the normal traffic's ack p99 while only the drain runs
// within stormLiveFactor of its value with no storm (issue 26); a second
// worker drains no slower than one. The rest is context.
func (r *Report) judgeStorms() {
	var drain1, drain2 float64
	for _, s := range r.Storms {
		w := fmt.Sprintf("%d worker%s", s.Workers, plural(s.Workers))
		pass := "FAIL"
		if s.ExtraRows == 0 && s.ExtraJobs == 0 && s.NewExact && s.Drained {
			pass = "PASS"
		}
		r.Targets = append(r.Targets,
			Target{Name: "storm, " + w + ": drained; extra rows / jobs; exact counts", Value: fmt.Sprintf("%v; %d / %d; %v", s.Drained, s.ExtraRows, s.ExtraJobs, s.NewExact),
				Goal: "true; 0 / 0; true", Result: pass},
			Target{Name: "storm, " + w + ": drain time", Value: f1(s.DrainSecs) + " s", Goal: "—", Result: "info"},
			Target{Name: "storm, " + w + ": normal ack p99 no storm / storm / drain only", Goal: "—", Result: "info",
				Value: fmt.Sprintf("%.1f / %.1f / %s", s.NormalBaseline.Latency.P99Ms, s.Normal.Latency.P99Ms, p99OrNone(s.NormalDrain))},
			Target{Name: "storm, " + w + ": normal traffic age p99", Value: fmt.Sprintf("%.0f ms", s.NormalAgeP99Ms), Goal: "—", Result: "info"})
		live := Target{Name: "storm, " + w + ": normal ack p99, drain only ÷ no storm", Value: "—", Goal: fmt.Sprintf("≤ %.0f×", stormLiveFactor), Result: "n/a"}
		if s.NormalDrain != nil && s.NormalBaseline.Latency.P99Ms > 0 {
			ratio := s.NormalDrain.Latency.P99Ms / s.NormalBaseline.Latency.P99Ms
			live.Value, live.Result = fmt.Sprintf("%.2f×", ratio), passIf(ratio <= stormLiveFactor)
			r.Ratios[fmt.Sprintf("storm%d_live_ack_p99_ratio", s.Workers)] = ratio
		}
		r.Targets = append(r.Targets, live)
		if s.DrainSecs > 0 {
			r.Ratios[fmt.Sprintf("storm%d_drain_events_per_sec", s.Workers)] = float64(s.Deliveries/2) / s.DrainSecs
		}
		if s.DrainOnlySecs > 0 && s.BacklogDrained {
			rate := float64(s.Backlog) / s.DrainOnlySecs
			r.Ratios[fmt.Sprintf("storm%d_backlog_events_per_sec", s.Workers)] = rate
			r.Targets = append(r.Targets, Target{Name: "storm, " + w + ": backlog drained with normal traffic", Value: fmt.Sprintf("%.1f s, %s events/s", s.DrainOnlySecs, thousands(rate)),
				Goal: "—", Result: "info"})
			if s.Workers == 1 {
				drain1 = rate
			} else if s.Workers == 2 {
				drain2 = rate
			}
		}
	}
	if drain1 > 0 && drain2 > 0 {
		r.Targets = append(r.Targets, Target{Name: "storm: 2 workers' backlog drain ÷ 1 worker's", Value: fmt.Sprintf("%.2f×", drain2/drain1),
			Goal: "≥ 1×", Result: passIf(drain2 >= drain1)})
	}
}

// passIf is a target's result: PASS when ok holds.
func passIf(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
