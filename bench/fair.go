package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The isolated storm (issue 27): one source storms at full speed while a
// second source, on a River queue of its own, keeps sending 10 events a
// second. It measures what the quiet source sees, with no storm and during
// the storm (from its first request until its last event is done): its
// ack latency, and its events' age at done (received → processed). Both
// should stay within fairFactor of their no-storm values.

// quietSource is the second source of the isolated storm, on queueQuiet.
const (
	quietSource = "quiet"
	queueQuiet  = "quiet"
	// quietRate is the quiet source's open-loop rate, events a second;
	// quietInFlight the most of its requests in flight at once.
	quietRate     = 10
	quietInFlight = 64
	// fairFactor is the most the storm may raise the quiet source's ack
	// p99 and age p99 over their values with no storm.
	fairFactor = 2.0
)

// FairResult is the isolated storm.
type FairResult struct {
	// Deliveries is the storm's size, all new events; Send its own load
	// (closed loop, --clients clients) and how long it took.
	Deliveries int          `json:"deliveries"`
	Send       *HTTPFigures `json:"send"`
	SendSecs   float64      `json:"send_seconds"`
	// DrainSecs runs from the storm's first request to its last event
	// done; Drained is false when --storm-deadline passed first.
	DrainSecs float64 `json:"drain_seconds"`
	Drained   bool    `json:"drained"`
	// Quiet is the quiet source's acks with no storm, QuietStorm during
	// it; the ages are of their events.
	Quiet           *HTTPFigures `json:"quiet"`
	QuietStorm      *HTTPFigures `json:"quiet_storm"`
	QuietAge        *AgeFigures  `json:"quiet_age"`
	QuietStormAge   *AgeFigures  `json:"quiet_storm_age"`
	StormAgeP99Ms   float64      `json:"storm_age_p99_ms"`
	CPU             *CPUUse      `json:"cpu,omitempty"`
	StormRefusedPct float64      `json:"storm_refused_pct"`
}

// AgeFigures are events' ages at done, received → processed.
type AgeFigures struct {
	Done  int64   `json:"done"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// phaseFair runs the isolated storm with one worker process, the product's
// defaults but for the quiet source's queue.
func (b *bench) phaseFair(ctx context.Context) error {
	n := b.opts.StormDeliveries
	r := &FairResult{Deliveries: n}
	b.report.Fair = r
	if err := b.resetTables(ctx); err != nil {
		return err
	}
	pc := procConfig{QuietQueue: true}
	recv, url, err := b.startReceiver(ctx, "receiver-fair", pc)
	if err != nil {
		return err
	}
	defer b.release(recv)
	w, readyURL, err := b.startWorkerWith("worker-fair", "worker", pc)
	if err != nil {
		return err
	}
	defer b.release(w)
	if err := w.waitReady(ctx, readyURL, 30*time.Second); err != nil {
		return err
	}
	quietURL := strings.TrimSuffix(url, benchSource) + quietSource
	quiet := func(window string, d time.Duration, stop <-chan struct{}) *LoadSpec {
		return &LoadSpec{
			URL: quietURL, Clients: quietInFlight, Rate: quietRate, Duration: d, MaxRequests: b.opts.MaxRequests,
			Next: unique("fq" + window), AckTimeout: ackTimeout, Stop: stop,
		}
	}
	progress("   isolated storm: %d deliveries from %d clients on %s; %s at %d/s on queue %s",
		n, b.opts.Clients, benchSource, quietSource, quietRate, queueQuiet)

	// Three times the storm phase's window: its p99 is the ratio's
	// denominator, and 10 a second gives few samples.
	baseRes := runLoad(ctx, quiet("b", 3*b.opts.StormBaseline, nil))
	r.Quiet = figures(quietInFlight, quietRate, baseRes, nil)
	b.report.HTTPTotals.add(baseRes)
	if _, err := b.waitPrefixDrained(ctx, "msg_fqb", []*Proc{w}, b.opts.DrainDeadline); err != nil {
		return err
	}

	procs := []*Proc{recv, w}
	cpu0 := takeCPU(b.postmaster, procs...)
	stop := make(chan struct{})
	quietDone := make(chan *LoadResult, 1)
	go func() { quietDone <- runLoad(ctx, quiet("s", b.opts.StormDeadline, stop)) }()
	start := time.Now()
	stormRes := runLoad(ctx, &LoadSpec{
		URL: url, Clients: b.opts.Clients, Duration: b.opts.StormDeadline, MaxRequests: int64(n),
		Next: unique("fst"), AckTimeout: ackTimeout,
	})
	r.SendSecs = time.Since(start).Seconds()
	r.Send = figures(b.opts.Clients, 0, stormRes, nil)
	b.report.HTTPTotals.add(stormRes)
	if stormRes.Requests > 0 {
		r.StormRefusedPct = 100 * float64(stormRes.Non2xx()) / float64(stormRes.Requests)
	}
	r.Drained, err = b.waitPrefixDrained(ctx, "msg_fst", []*Proc{w}, b.opts.StormDeadline-time.Since(start))
	cpu1 := takeCPU(b.postmaster, procs...)
	close(stop)
	quietRes := <-quietDone
	b.report.HTTPTotals.add(quietRes)
	r.QuietStorm = figures(quietInFlight, quietRate, quietRes, cpuSince(cpu0, cpu1, quietRes.OK()))
	if err != nil {
		return err
	}
	stormAges, err := agesWithPrefix(ctx, b.pool, "msg_fst")
	if err != nil {
		return err
	}
	r.DrainSecs = time.Since(start).Seconds()
	if r.Drained && !stormAges.LastProcessed.IsZero() {
		r.DrainSecs = stormAges.LastProcessed.Sub(start).Seconds()
	}
	r.StormAgeP99Ms = ms(stormAges.P99)
	r.CPU = cpuSince(cpu0, cpu1, stormAges.Done)
	if _, err := b.waitPrefixDrained(ctx, "msg_fqs", []*Proc{w}, b.opts.DrainDeadline); err != nil {
		return err
	}
	for _, a := range []struct {
		prefix string
		into   **AgeFigures
	}{{"msg_fqb", &r.QuietAge}, {"msg_fqs", &r.QuietStormAge}} {
		ages, err := agesWithPrefix(ctx, b.pool, a.prefix)
		if err != nil {
			return err
		}
		*a.into = &AgeFigures{Done: ages.Done, P50Ms: ms(ages.P50), P99Ms: ms(ages.P99), MaxMs: ms(ages.Max)}
	}
	progress("   storm of %d drained %v in %.1f s (%.0f%% refused); quiet ack p99 %.1f ms (no storm %.1f ms), age p99 %.0f ms (no storm %.0f ms)",
		stormRes.SentNew, r.Drained, r.DrainSecs, r.StormRefusedPct, r.QuietStorm.Latency.P99Ms, r.Quiet.Latency.P99Ms,
		r.QuietStormAge.P99Ms, r.QuietAge.P99Ms)
	return nil
}

// printFair adds the isolated storm's rows to the table.
func (r *Report) printFair(t *table) {
	f := r.Fair
	if f == nil || f.Quiet == nil || f.QuietStorm == nil {
		return
	}
	note := fmt.Sprintf("sent in %.1f s at %s/s, %.0f %% refused (source share); storm age p99 %.0f ms", f.SendSecs,
		thousands(f.Send.OKPerSec), f.StormRefusedPct, f.StormAgeP99Ms)
	if !f.Drained {
		note = "deadline hit; " + note
	}
	t.row(fmt.Sprintf("isolated storm: %s on %s, drain s", thousands(float64(f.Deliveries)), benchSource), f1(f.DrainSecs), "", "", "", note)
	for _, win := range []struct {
		name string
		ack  *HTTPFigures
		age  *AgeFigures
	}{{"no storm", f.Quiet, f.QuietAge}, {"storm", f.QuietStorm, f.QuietStormAge}} {
		t.row(fmt.Sprintf("isolated storm: %s ack at %d/s, %s", quietSource, quietRate, win.name), thousands(win.ack.OKPerSec),
			f2(win.ack.Latency.P50Ms), f2(win.ack.Latency.P99Ms), f2(win.ack.Latency.P999Ms), lateNote(win.ack)+failNote(win.ack))
		if win.age != nil {
			t.row(fmt.Sprintf("isolated storm: %s event age, %s", quietSource, win.name), "", f1(win.age.P50Ms), f1(win.age.P99Ms), "",
				fmt.Sprintf("max %.0f ms, %d events", win.age.MaxMs, win.age.Done))
		}
	}
}

// judgeFair adds the isolated storm's targets: every quiet delivery
// answered 2xx, and its ack p99 and age p99 within fairFactor of their
// values with no storm.
func (r *Report) judgeFair() {
	f := r.Fair
	if f == nil || f.Quiet == nil || f.QuietStorm == nil || f.QuietAge == nil || f.QuietStormAge == nil {
		return
	}
	goal := fmt.Sprintf("≤ %.0f×", fairFactor)
	ratio := func(name string, storm, calm float64) {
		t := Target{Name: "isolated storm: " + name + ", storm ÷ no storm", Value: "—", Goal: goal, Result: "n/a"}
		if calm > 0 {
			v := storm / calm
			t.Value, t.Result = fmt.Sprintf("%.2f× (%.1f ÷ %.1f ms)", v, storm, calm), passIf(v <= fairFactor)
			r.Ratios["fair_"+strings.ReplaceAll(name, " ", "_")+"_ratio"] = v
		}
		r.Targets = append(r.Targets, t)
	}
	failed := f.QuietStorm.Non2xx + f.QuietStorm.Errors + f.Quiet.Non2xx + f.Quiet.Errors
	r.Targets = append(r.Targets, Target{Name: "isolated storm: quiet deliveries not answered 2xx; storm drained",
		Value: fmt.Sprintf("%d; %v", failed, f.Drained), Goal: "0; true", Result: passIf(failed == 0 && f.Drained)})
	ratio("quiet ack p99", f.QuietStorm.Latency.P99Ms, f.Quiet.Latency.P99Ms)
	ratio("quiet age p99", f.QuietStormAge.P99Ms, f.QuietAge.P99Ms)
}
