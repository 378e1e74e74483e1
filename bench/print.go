package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"
)

// print writes the table.
func (r *Report) print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "\nhookbench %s run, %s, %s, source %s\n", r.Mode, r.StartedAt.Format("2006-01-02 15:04 UTC"),
		(time.Duration(r.Seconds) * time.Second).String(), cmp.Or(r.Machine.Commit, "unknown"))
	fmt.Fprintf(w, "machine: %d × %s, %s GiB, %s, load average %s at start; %s; PostgreSQL %s (fsync=%s, synchronous_commit=%s, full_page_writes=%s, shared_buffers=%s%s)\n",
		m.CPUs, m.CPUModel, m.MemoryGB, m.Kernel, m.LoadAvg, m.Go, m.Postgres, m.Settings["fsync"], m.Settings["synchronous_commit"],
		m.Settings["full_page_writes"], m.Settings["shared_buffers"], map[bool]string{true: ", same machine", false: ", remote"}[m.LocalServer])
	fmt.Fprintf(w, "cores: CPU cores kept busy during each window, by hookbench (load generator), pg (the server), the receiver/worker, and other processes\n")
	fmt.Fprintf(w, "(c)⊕(e): the pipeline's maximum, 1/(1/(c) + 1/(e) noop drain of 1 worker), since the receiver and the worker share the cores\n\n")

	t := &table{w: w}
	t.header("measurement", "events/s", "p50 ms", "p99 ms", "p99.9 ms", "notes")
	best := r.bestCeiling()
	for _, c := range r.Ceiling {
		note := cpuNote(c.CPU, c.Errors)
		if c.EventsPerSec == best && len(r.Ceiling) > 1 {
			note = "best; " + note
		}
		t.row(fmt.Sprintf("(a) ceiling: Ingest 1 event/tx, %d conns", c.Concurrency), thousands(c.EventsPerSec),
			f2(c.Latency.P50Ms), f2(c.Latency.P99Ms), f2(c.Latency.P999Ms), note)
	}
	r.printRun(t, "(b) receiver, tx per delivery", r.PerRequest)
	r.printRun(t, "(c) receiver, group commit", r.GroupCommit)
	if d := r.Duplicates; d != nil && d.Storm != nil {
		t.row(fmt.Sprintf("(d) storm: 1 event × %d clients, dup/s", d.Storm.Clients), thousands(d.StormDupPerSec),
			f2(d.Storm.Latency.P50Ms), f2(d.Storm.Latency.P99Ms), f2(d.Storm.Latency.P999Ms), failNote(d.Storm)+cpuNote(d.Storm.CPU, 0))
	}
	if d := r.Duplicates; d != nil && d.Mix != nil {
		t.row("(d) 50 % mix: new deliveries/s", thousands(d.MixNewPerSec), f2(d.MixNewLatency.P50Ms), f2(d.MixNewLatency.P99Ms), f2(d.MixNewLatency.P999Ms), failNote(d.Mix)+cpuNote(d.Mix.CPU, 0))
		t.row("(d) 50 % mix: duplicate deliveries/s", thousands(d.MixDupPerSec), f2(d.MixDupLatency.P50Ms), f2(d.MixDupLatency.P99Ms), f2(d.MixDupLatency.P999Ms),
			fmt.Sprintf("extra rows %d, extra jobs %d", d.ExtraRows, d.ExtraJobs))
	}
	for _, rv := range []*RiverResult{r.River, r.RiverAsWorker} {
		if rv != nil {
			t.row(fmt.Sprintf("(e) River no-op burn-down, %d workers, %.0f ms cooldown, %s jobs", rv.Workers, rv.CooldownMs, thousands(float64(rv.Jobs))),
				thousands(rv.JobsPerSec), "", "", "", fmt.Sprintf("%.1f s; %s", rv.Seconds, cpuNote(rv.CPU, 0)))
		}
	}
	for _, d := range r.Drains {
		note := fmt.Sprintf("%.1f s, %d failed, RSS %.0f MB; %s", d.Seconds, d.Failed, d.PeakRSSMB, cpuNote(d.CPU, 0))
		if d.DeadlineHit {
			note = fmt.Sprintf("deadline: %d of %d done in %.0f s; ", d.Done, d.Events, d.Seconds) + note
		}
		settings := ""
		if d.Concurrency > 0 {
			settings = fmt.Sprintf(" (concurrency %d)", d.Concurrency)
		}
		if d.MaxConns > 0 {
			settings += fmt.Sprintf(" (max_conns %d)", d.MaxConns)
		}
		if d.GroupMaxEvents > 0 {
			settings += fmt.Sprintf(" (group_max_events %d)", d.GroupMaxEvents)
		}
		if d.Accounts > 0 {
			settings += fmt.Sprintf(" (%d hot accounts)", d.Accounts)
		}
		t.row(fmt.Sprintf("(e) drain %s, %d worker%s%s, %s events", d.Handler, d.Workers, plural(d.Workers), settings, thousands(float64(d.Events))),
			thousands(d.EventsPerSec), "", "", "", note)
	}
	r.printTake(t)
	if s := r.Steady; s != nil && s.Ack != nil {
		of := "(c)"
		if s.Basis != "(c)" {
			of = "(c)⊕(e)"
		}
		t.row(fmt.Sprintf("(f) ack at %.0f %% of %s: %s/s open loop", 100*s.Fraction, of, thousands(s.Rate)), thousands(s.Ack.OKPerSec),
			f2(s.Ack.Latency.P50Ms), f2(s.Ack.Latency.P99Ms), f2(s.Ack.Latency.P999Ms), lateNote(s.Ack)+failNote(s.Ack)+cpuNote(s.Ack.CPU, 0))
		t.row("(f) event age at done (received → processed)", "", f1(s.AgeP50Ms), f1(s.AgeP99Ms), "",
			ageNote(s))
	}
	r.printStorms(t)
	r.printFair(t)
	for _, kind := range []string{"receiver", "worker", "ledger"} {
		var parts []string
		for _, name := range sortedKeys(r.PeakRSS) {
			if rest, ok := strings.CutPrefix(name, kind+"-"); ok {
				parts = append(parts, fmt.Sprintf("%s %.0f", rest, r.PeakRSS[name]))
			}
		}
		if len(parts) > 0 {
			t.row(fmt.Sprintf("(g) peak RSS MB, %s processes", kind), "", "", "", "", strings.Join(parts, ", "))
		}
	}
	if s := r.Scale; s != nil {
		r.printRun(t, "scale: (c), empty inbox (interleaved reference)", s.Empty)
		r.printRun(t, fmt.Sprintf("scale: (c), %s rows in inbox", thousands(float64(s.Rows))), s.Full)
	}
	t.flush()

	fmt.Fprintln(w)
	t = &table{w: w}
	t.header("target", "value", "goal", "result")
	for _, g := range r.Targets {
		t.row(g.Name, g.Value, g.Goal, g.Result)
	}
	t.flush()
	if noisy := r.noisyWindows(0.25); len(noisy) > 0 {
		fmt.Fprintf(w, "\nnoise: other processes kept ≥ 0.25 cores busy during %s;\n"+
			"       figures measured then are lower than this machine can do, and ratios that involve them are less reliable.\n",
			strings.Join(noisy, ", "))
	}
	r.printStatements(w)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func (r *Report) printRun(t *table, label string, run *ReceiverRun) {
	if run == nil {
		return
	}
	for _, f := range []*HTTPFigures{run.One, run.Many} {
		if f == nil {
			continue
		}
		t.row(fmt.Sprintf("%s, %d client%s", label, f.Clients, plural(f.Clients)), thousands(f.NewPerSec),
			f2(f.Latency.P50Ms), f2(f.Latency.P99Ms), f2(f.Latency.P999Ms), failNote(f)+cpuNote(f.CPU, 0))
	}
}

func failNote(f *HTTPFigures) string {
	if f.Non2xx+f.Errors+f.OverAck == 0 {
		return ""
	}
	return fmt.Sprintf("%d non-2xx, %d errors, %d past ack_timeout; ", f.Non2xx, f.Errors, f.OverAck)
}

// cpuNote says which parts kept the cores busy, e.g. "cpu pg 1.2 recv 0.6".
func cpuNote(u *CPUUse, errs int64) string {
	var s []string
	if errs > 0 {
		s = append(s, fmt.Sprintf("%d errors", errs))
	}
	if u != nil {
		var parts []string
		for _, name := range sortedKeys(u.Cores) {
			short := strings.SplitN(name, "-", 2)[0]
			if short == "postgres" {
				short = "pg"
			}
			parts = append(parts, fmt.Sprintf("%s %.2f", short, u.Cores[name]))
		}
		s = append(s, "cores: "+strings.Join(parts, ", "))
	}
	return strings.Join(s, "; ")
}

func ageNote(s *SteadyResult) string {
	if !s.Drained {
		return fmt.Sprintf("only %d of %d events done %.0f s after the load: ages of done events only", s.Done, s.Accepted, s.DrainAfterLoadSecs)
	}
	return fmt.Sprintf("max %.0f ms; all %d done %.1f s after the load", s.AgeMaxMs, s.Done, s.DrainAfterLoadSecs)
}

// noisyWindows lists the measured windows during which processes outside
// the benchmark kept at least limit cores busy.
func (r *Report) noisyWindows(limit float64) []string {
	var out []string
	add := func(label string, u *CPUUse) {
		if u != nil && u.Cores["other"] >= limit {
			out = append(out, fmt.Sprintf("%s (%.2f)", label, u.Cores["other"]))
		}
	}
	for _, c := range r.Ceiling {
		add(fmt.Sprintf("(a) %d", c.Concurrency), c.CPU)
	}
	type namedRun struct {
		label string
		run   *ReceiverRun
	}
	runs := []namedRun{{"(b)", r.PerRequest}, {"(c)", r.GroupCommit}}
	if r.Scale != nil {
		runs = append(runs, namedRun{"scale empty", r.Scale.Empty}, namedRun{"scale full", r.Scale.Full})
	}
	for _, x := range runs {
		if x.run != nil && x.run.One != nil {
			add(x.label+" 1", x.run.One.CPU)
		}
		if x.run != nil && x.run.Many != nil {
			add(fmt.Sprintf("%s %d", x.label, x.run.Many.Clients), x.run.Many.CPU)
		}
	}
	if d := r.Duplicates; d != nil {
		if d.Storm != nil {
			add("(d) storm", d.Storm.CPU)
		}
		if d.Mix != nil {
			add("(d) mix", d.Mix.CPU)
		}
	}
	if r.River != nil {
		add("(e) River", r.River.CPU)
	}
	for _, d := range r.Drains {
		add(fmt.Sprintf("(e) %s×%d", d.Handler, d.Workers), d.CPU)
	}
	if s := r.Steady; s != nil && s.Ack != nil {
		add("(f)", s.Ack.CPU)
	}
	return out
}

// lateNote says how many open-loop requests left late, all clients busy.
func lateNote(f *HTTPFigures) string {
	if f.Late == 0 || f.Requests == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f %% sent late (rate not kept up); ", 100*float64(f.Late)/float64(f.Requests))
}
