package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hookinbox/hookinbox/pkg/worker"
)

// Target is one goal of the issue, judged on this run.
type Target struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Goal   string `json:"goal"`
	Result string `json:"result"` // PASS, FAIL, n/a when not measured, info for context
}

// judge computes the ratios and the targets.
func (r *Report) judge() {
	add := func(name, value, goal string, measured, pass bool) {
		res := "n/a"
		if measured {
			res = "FAIL"
			if pass {
				res = "PASS"
			}
		} else {
			value = "—"
		}
		r.Targets = append(r.Targets, Target{Name: name, Value: value, Goal: goal, Result: res})
	}
	ratio := func(key string, num, den float64) (float64, bool) {
		if num <= 0 || den <= 0 {
			return 0, false
		}
		r.Ratios[key] = num / den
		return num / den, true
	}
	best := r.bestCeiling()
	b, c := r.PerRequest, r.GroupCommit
	cMany, cOne, bMany, bOne := many(c), one(c), many(b), one(b)

	v, ok := ratio("c_over_a", cMany.NewPerSec, best)
	add("(c)/(a): group commit vs the 1-event/tx ceiling", f2(v)+"×", "≥ 2×", ok, v >= 2)
	v, ok = ratio("c_over_b_many", cMany.NewPerSec, bMany.NewPerSec)
	add(fmt.Sprintf("(c)/(b) at %d clients", cMany.Clients), f2(v)+"×", "≥ 3×", ok, v >= 3)
	v, ok = ratio("b_over_c_p50_one", bOne.Latency.P50Ms, cOne.Latency.P50Ms)
	add("(b)/(c) ack p50 at 1 client", f2(v), "≥ 0.83 (c within 20 %)", ok, v >= 1/1.2)

	if s := r.Steady; s != nil && s.Ack != nil {
		add(fmt.Sprintf("(f) ack p99 at %.0f/s", s.Rate), f1(s.Ack.Latency.P99Ms)+" ms", "≤ 25 ms", true, s.Ack.Latency.P99Ms <= 25)
		add(fmt.Sprintf("(f) ack p99.9 at %.0f/s", s.Rate), f1(s.Ack.Latency.P999Ms)+" ms", "≤ 100 ms", true, s.Ack.Latency.P999Ms <= 100)
	} else {
		add("(f) ack p99 / p99.9 at 50 % load", "", "≤ 25 / 100 ms", false, false)
	}

	if d := r.Duplicates; d != nil && d.Storm != nil && d.Mix != nil {
		v, ok = ratio("storm_dup_over_c_new", d.StormDupPerSec, cMany.NewPerSec)
		add("(d) storm duplicates/s ÷ (c) new/s", f2(v)+"×", "≥ 1×", ok, v >= 1)
		v, ok = ratio("mix_dup_over_new", d.MixDupPerSec, d.MixNewPerSec)
		add("(d) mix duplicates/s ÷ new/s", f2(v)+"×", "≥ 1×", ok, v >= 1)
		add("(d) extra rows / extra jobs; exact counts", fmt.Sprintf("%d / %d; %v", d.ExtraRows, d.ExtraJobs, d.CountsExact),
			"0 / 0; true", true, d.ExtraRows == 0 && d.ExtraJobs == 0 && d.CountsExact)
	} else {
		add("(d) duplicates/s ≥ new/s, zero extra rows/jobs", "", "≥ 1×; 0 / 0", false, false)
	}

	r.judgeStorms()
	r.judgeFair()
	r.judgeTake()

	river := 0.0
	if r.River != nil {
		river = r.River.JobsPerSec
	}
	for _, goal := range []struct {
		handler string
		min     float64
	}{{"noop", 0.5}, {"ledger", 0.3}} {
		for _, workers := range []int{1, 2} {
			d := r.drain(goal.handler, workers)
			rate := 0.0
			if d != nil {
				rate = d.EventsPerSec
			}
			v, ok := ratio(fmt.Sprintf("e_%s%d_over_river", goal.handler, workers), rate, river)
			name := fmt.Sprintf("(e) %s drain, %d worker%s ÷ River", goal.handler, workers, plural(workers))
			add(name, pct(v), fmt.Sprintf("≥ %.0f %%", 100*goal.min), ok, v >= goal.min)
		}
	}

	// Issue 26: the defaults drain a storm at a quarter of River's best at
	// least, and a second process adds to the first.
	for _, workers := range []int{1, 2} {
		rate := 0.0
		if d := r.drain("noop", workers); d != nil {
			rate = d.EventsPerSec
		}
		v, ok := ratio(fmt.Sprintf("e_noop%d_defaults_over_river", workers), rate, river)
		add(fmt.Sprintf("(e) noop drain at the defaults, %d worker%s ÷ River (issue 26)", workers, plural(workers)), pct(v), "≥ 25 %", ok, v >= 0.25)
	}
	if d1, d2 := r.drain("noop", 1), r.drain("noop", 2); d1 != nil && d2 != nil {
		v, ok := ratio("e_noop2_over_noop1", d2.EventsPerSec, d1.EventsPerSec)
		add("(e) noop drain at the defaults, 2 workers ÷ 1 worker", f2(v)+"×", "≥ 1×", ok, v >= 1)
	}
	if d, old := r.drain("noop", 1), r.drainOldDefaults(); d != nil && old != nil {
		if v, ok := ratio("e_noop1_over_old_defaults", d.EventsPerSec, old.EventsPerSec); ok {
			r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("(e) noop drain, the defaults ÷ those before issue 26 (concurrency %d, a transaction per event)", oldConcurrency),
				Value: f2(v) + "×", Goal: "—", Result: "info"})
		}
	}
	// No collapse: a thousand jobs in flight on 20 connections, each in a
	// transaction of its own, drain at least as fast as 32 in flight.
	if d, base := r.findDrain("noop", 1, stormConcurrency, 1, 0), r.drainOldDefaults(); d != nil && base != nil {
		v, ok := ratio("e_noop1_c1000_over_c32", d.EventsPerSec, base.EventsPerSec)
		add(fmt.Sprintf("(e) noop drain, a transaction per event: concurrency 1000 / max_conns %d ÷ concurrency 32", d.MaxConns), f2(v)+"×", "≥ 1×", ok, v >= 1)
	}
	// A replay storm's settings: concurrency 1000, 20 connections, group
	// commit. Against River, and against the same without groups and the
	// defaults (a transaction per event must never be much faster).
	for _, goal := range []struct {
		handler string
		min     float64
	}{{"noop", 0.5}, {"ledger", 0.3}} {
		g := r.drainGroup(goal.handler, 0)
		if g == nil {
			continue
		}
		v, ok := ratio("e_"+goal.handler+"1_group_over_river", g.EventsPerSec, river)
		add(fmt.Sprintf("(e) %s drain, concurrency 1000 / max_conns %d / group_max_events %d ÷ River", goal.handler, g.MaxConns, g.GroupMaxEvents),
			pct(v), fmt.Sprintf("≥ %.0f %%", 100*goal.min), ok, v >= goal.min)
	}
	for _, c := range []struct {
		key, name string
		num, den  *DrainResult
	}{
		{"e_noop1_group_over_c1000", "(e) noop, group commit ÷ a transaction per event, both at concurrency 1000", r.drainGroup("noop", 0), r.findDrain("noop", 1, stormConcurrency, 1, 0)},
		{"e_ledger1_group_over_default", "(e) ledger, group commit at concurrency 1000 ÷ the defaults", r.drainGroup("ledger", 0), r.drain("ledger", 1)},
		{"e_ledger1_hot_group_over_default", fmt.Sprintf("(e) ledger on %d hot accounts, group commit at concurrency 1000 ÷ the defaults", hotAccounts),
			r.drainGroup("ledger", hotAccounts), r.drainHot("ledger", hotAccounts)},
	} {
		if c.num == nil || c.den == nil {
			continue
		}
		if v, ok := ratio(c.key, c.num.EventsPerSec, c.den.EventsPerSec); ok {
			r.Targets = append(r.Targets, Target{Name: c.name, Value: f2(v) + "×", Goal: "—", Result: "info"})
		}
	}
	if rw := r.RiverAsWorker; rw != nil && river > 0 {
		if v, ok := ratio("e_river_as_worker_over_river", rw.JobsPerSec, river); ok {
			r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("(e) River at the worker's settings (%d workers, %.0f ms) ÷ River's best", rw.Workers, rw.CooldownMs),
				Value: pct(v), Goal: "—", Result: "info"})
		}
	}

	// Context for (e): a worker's transaction per event against (a)'s
	// transaction per event.
	if d := r.drainOldDefaults(); d != nil {
		if v, ok := ratio("e_noop1_over_a", d.EventsPerSec, best); ok {
			r.Targets = append(r.Targets, Target{Name: "(e) noop drain, 1 worker ÷ (a) best (both a transaction per event)",
				Value: f2(v) + "×", Goal: "—", Result: "info"})
		}
	}

	// The receiver's target is at maximum throughput: (c) and (d), 64
	// clients. (f) can be an overload with thousands of connections open,
	// shown for context.
	recv, work := r.peakRSS("receiver-c", "receiver-d"), r.peakRSS("worker-", "ledger-")
	add("(g) receiver peak RSS at (c)/(d) load", f1(recv)+" MB", "≤ 80 MB", recv > 0, recv <= 80)
	if f, s := r.PeakRSS["receiver-f"], r.Steady; f > 0 && s != nil {
		r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("(g) receiver peak RSS in (f), ≤ %s requests in flight", thousands(float64(r.steadyInflight()))),
			Value: f1(f) + " MB", Goal: "—", Result: "info"})
	}
	add("(g) worker peak RSS (noop and ledger)", f1(work)+" MB", "≤ 150 MB", work > 0, work <= 150)

	// Scale is judged against (c) on an empty inbox measured interleaved
	// with it (phaseScale); the ratio to (c) itself, measured minutes
	// earlier, is shown for context.
	if s := r.Scale; s != nil {
		v, ok = ratio("scale_over_reference", many(s.Full).NewPerSec, many(s.Empty).NewPerSec)
		add(fmt.Sprintf("scale: (c) with %s rows ÷ (c) on an empty inbox, interleaved", thousands(float64(s.Rows))), f2(v)+"×", "≥ 0.85×", ok, v >= 0.85)
		if v, ok := ratio("scale_over_c", many(s.Full).NewPerSec, cMany.NewPerSec); ok {
			r.Targets = append(r.Targets, Target{Name: "scale: the same ÷ (c)", Value: f2(v) + "×", Goal: "—", Result: "info"})
		}
	} else {
		add("scale: (c) with 2,000,000 rows ÷ (c) on an empty inbox", "", "≥ 0.85×", false, false)
	}

	t := r.HTTPTotals
	add("requests past ack_timeout, all loads", strconv.FormatInt(t.OverAck, 10), "0", t.Requests > 0, t.OverAck == 0)
	add("non-2xx answers and transport errors, all loads", fmt.Sprintf("%d + %d", t.Non2xx, t.Errors), "0", t.Requests > 0, t.Non2xx+t.Errors == 0)
}

func (r *Report) bestCeiling() float64 {
	best := 0.0
	for _, c := range r.Ceiling {
		best = max(best, c.EventsPerSec)
	}
	return best
}

func (r *Report) drain(handler string, workers int) *DrainResult {
	return r.findDrain(handler, workers, 0, 0, 0)
}

// findDrain finds the drain of handler by workers processes at
// concurrency and group_max_events (0: the defaults) on accounts accounts
// (0: the usual 10,000).
func (r *Report) findDrain(handler string, workers, concurrency, groupMax, accounts int) *DrainResult {
	for _, d := range r.Drains {
		if d.Handler == handler && d.Workers == workers && d.Concurrency == concurrency && d.GroupMaxEvents == groupMax && d.Accounts == accounts {
			return d
		}
	}
	return nil
}

// drainGroup finds the drain of handler by one process at a replay
// storm's settings (concurrency 1000, group_max_events 50) on as many
// accounts as accounts says (0: the usual 10,000).
func (r *Report) drainGroup(handler string, accounts int) *DrainResult {
	return r.findDrain(handler, 1, stormConcurrency, worker.GroupMaxEventsAdvised, accounts)
}

// drainHot finds the drain of handler by one process at the defaults on
// accounts hot accounts.
func (r *Report) drainHot(handler string, accounts int) *DrainResult {
	return r.findDrain(handler, 1, 0, 0, accounts)
}

// drainOldDefaults finds the noop drain by one process at the defaults
// before issue 26: concurrency 32, a transaction per event.
func (r *Report) drainOldDefaults() *DrainResult {
	return r.findDrain("noop", 1, oldConcurrency, 1, 0)
}

// peakRSS returns the largest peak RSS of the processes whose names start
// with one of prefixes.
func (r *Report) peakRSS(prefixes ...string) float64 {
	m := 0.0
	for name, v := range r.PeakRSS {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				m = max(m, v)
			}
		}
	}
	return m
}

var noFigures = &HTTPFigures{}

func many(r *ReceiverRun) *HTTPFigures {
	if r == nil || r.Many == nil {
		return noFigures
	}
	return r.Many
}

func one(r *ReceiverRun) *HTTPFigures {
	if r == nil || r.One == nil {
		return noFigures
	}
	return r.One
}

// steadyInflight is (f)'s bound on requests in flight.
func (r *Report) steadyInflight() int {
	n, _ := r.Options["steady_inflight"].(int)
	return n
}
