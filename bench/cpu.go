package main

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"time"
)

// CPUSnapshot is the CPU time used so far by each part of the system under
// test: this load generator, the PostgreSQL server, and each subprocess.
type CPUSnapshot struct {
	at       time.Time
	self, pg time.Duration
	pgOK     bool
	procs    map[string]time.Duration
	// busy is the whole machine's non-idle CPU time, to tell what else
	// ran during a window.
	busy time.Duration
}

// takeCPU snapshots the CPU time of hookbench, the server whose postmaster
// is given (0 if unknown), and procs.
func takeCPU(postmaster int, procs ...*Proc) CPUSnapshot {
	s := CPUSnapshot{at: time.Now(), self: selfCPU(), busy: machineBusy(), procs: map[string]time.Duration{}}
	s.pg, s.pgOK = serverCPU(postmaster)
	for _, p := range procs {
		_, s.procs[p.Name] = p.Sample()
	}
	return s
}

// takeCPUAt waits until at, then snapshots like takeCPU.
func takeCPUAt(ctx context.Context, at time.Time, postmaster int, procs ...*Proc) CPUSnapshot {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(at)):
	}
	return takeCPU(postmaster, procs...)
}

// storeMax raises a to v unless it holds more already.
func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// CPUUse is where CPU time went during a window, in CPU-seconds per second
// of wall time (2.0 is both cores of a 2-core machine, busy), per part.
type CPUUse struct {
	// WallSeconds is the window.
	WallSeconds float64 `json:"wall_seconds"`
	// Cores maps a part ("hookbench", "postgres", "receiver", …) to the
	// cores it kept busy on average; "other" is the rest of the machine's
	// busy time (other processes: a noisy neighbour shows here).
	Cores map[string]float64 `json:"cores"`
	// MicrosPerEvent maps a part to its CPU microseconds per event, when
	// the window's event count is known.
	MicrosPerEvent map[string]float64 `json:"us_per_event,omitempty"`
	// Events is that count.
	Events int64 `json:"events,omitempty"`
}

// mergeCPU returns the CPU use of two windows taken together.
func mergeCPU(a, b *CPUUse) *CPUUse {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	u := &CPUUse{WallSeconds: a.WallSeconds + b.WallSeconds, Events: a.Events + b.Events, Cores: map[string]float64{}}
	seconds := func(x *CPUUse, k string) float64 { return x.Cores[k] * x.WallSeconds }
	for _, x := range []*CPUUse{a, b} {
		for k := range x.Cores {
			u.Cores[k] = (seconds(a, k) + seconds(b, k)) / u.WallSeconds
			if _, ok := x.MicrosPerEvent[k]; ok && u.Events > 0 {
				if u.MicrosPerEvent == nil {
					u.MicrosPerEvent = map[string]float64{}
				}
				u.MicrosPerEvent[k] = (seconds(a, k) + seconds(b, k)) * 1e6 / float64(u.Events)
			}
		}
	}
	return u
}

// cpuSince returns the CPU used from before to after, and per event when
// events > 0.
func cpuSince(before, after CPUSnapshot, events int64) *CPUUse {
	wall := after.at.Sub(before.at).Seconds()
	if wall <= 0 {
		return nil
	}
	u := &CPUUse{WallSeconds: wall, Events: events, Cores: map[string]float64{}}
	add := func(name string, d time.Duration) {
		u.Cores[name] = d.Seconds() / wall
		if events > 0 {
			if u.MicrosPerEvent == nil {
				u.MicrosPerEvent = map[string]float64{}
			}
			u.MicrosPerEvent[name] = float64(d.Microseconds()) / float64(events)
		}
	}
	ours := after.self - before.self
	add("hookbench", after.self-before.self)
	if before.pgOK && after.pgOK {
		add("postgres", after.pg-before.pg)
		ours += after.pg - before.pg
	}
	for _, name := range slices.Sorted(maps.Keys(after.procs)) {
		add(name, after.procs[name]-before.procs[name])
		ours += after.procs[name] - before.procs[name]
	}
	if before.busy > 0 && after.busy > 0 {
		u.Cores["other"] = max(0, (after.busy-before.busy-ours).Seconds()/wall)
	}
	return u
}
