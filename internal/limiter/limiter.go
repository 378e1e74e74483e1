// Package limiter is an adaptive limit on how many transactions a process
// runs at once: the worker's answer to a replay storm that would otherwise
// take every core of the database from the receiver's live traffic.
//
// Its signal is the latency of the process's own statements, which rises
// when the database is busy, whoever keeps it busy. The limiter keeps a
// floor, the lowest smoothed latency it has seen (drifting slowly up while
// the limit is 1, so that a floor from a quieter past is forgotten, but
// never above the latency at the least load the limiter can make), and
// once a round (as
// many samples as the limit, at least RoundMin) it decides: above
// Tolerance times the floor it cuts the limit by a quarter; at or under it,
// with work waiting for a permit, it adds one. That is additive increase,
// multiplicative decrease, as TCP's congestion control, on a latency
// signal, as Netflix's concurrency-limits gradient. Its inputs are
// durations and a flag, never a clock, so its behaviour is tested with
// plain numbers.
//
// Waiting for a permit holds nothing else: the caller acquires one before
// it takes a connection from the pool.
package limiter

import (
	"context"
	"sync"
	"time"
)

const (
	// Tolerance is how far above its floor the smoothed latency may rise
	// before the limit comes down.
	Tolerance = 2.0
	// RoundMin is the fewest samples between two decisions.
	RoundMin = 8
	// decrease is the factor a congested round cuts the limit by.
	decrease = 0.75
	// smoothing is the weight of a new sample in the smoothed latency.
	smoothing = 1.0 / 8
	// floorDrift is how much the floor rises with each sample above it
	// while the limit is 1: doubling in about 350 samples, so that a floor
	// from a quieter past does not hold the limit at 1 for ever.
	floorDrift = 1.0 / 512
)

// Limiter hands out permits, at most Limit at once. Its zero value is not
// usable; build it with New.
type Limiter struct {
	mu  sync.Mutex
	max int
	// wake is closed when a permit becomes free (see Wake).
	wake    chan struct{}
	limit   float64
	inUse   int
	waiters []chan struct{}
	// smoothed and floor are latencies in nanoseconds; 0 before the first
	// sample.
	smoothed, floor float64
	// samples counts the samples of the current round; demand notes one
	// that had work waiting.
	samples int
	demand  bool
}

// New returns a Limiter whose limit starts at 1 and never exceeds maxLimit
// (at least 1).
func New(maxLimit int) *Limiter {
	return &Limiter{max: max(1, maxLimit), limit: 1, wake: make(chan struct{})}
}

// Acquire waits for a permit, or for ctx to end (its error). The caller
// gives the permit back with Release.
func (l *Limiter) Acquire(ctx context.Context) error {
	l.mu.Lock()
	if l.inUse < l.allowed() && len(l.waiters) == 0 {
		l.inUse++
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, w := range l.waiters {
			if w == ch {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				return ctx.Err()
			}
		}
		// Granted meanwhile: give it back.
		l.inUse--
		l.grant()
		return ctx.Err()
	}
}

// TryAcquire takes a permit if one is free and no one waits for one, and
// reports whether it did.
func (l *Limiter) TryAcquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inUse < l.allowed() && len(l.waiters) == 0 {
		l.inUse++
		return true
	}
	return false
}

// Wake returns a channel closed once a permit is free for TryAcquire:
// take it before a TryAcquire that fails, and wait on it.
func (l *Limiter) Wake() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wake
}

// Available returns how many more permits may be taken now.
func (l *Limiter) Available() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, l.allowed()-l.inUse)
}

// Release gives a permit back.
func (l *Limiter) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inUse--
	l.grant()
}

// Observe records one latency sample; demand says whether work was
// waiting for a permit when it was taken. The limit grows only with
// demand: an idle limiter keeps its limit.
func (l *Limiter) Observe(latency time.Duration, demand bool) {
	if latency <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := float64(latency)
	if l.smoothed == 0 {
		l.smoothed = s
	} else {
		l.smoothed += (s - l.smoothed) * smoothing
	}
	switch {
	case l.floor == 0 || l.smoothed < l.floor:
		l.floor = l.smoothed
	case l.allowed() == 1:
		// At the least load this limiter can make, what it sees is the
		// database's latency under everyone else's: the floor rises
		// towards it. Above 1 it does not, or the floor would follow the
		// latency the limit itself causes.
		l.floor = min(l.floor*(1+floorDrift), l.smoothed)
	}
	l.demand = l.demand || demand
	l.samples++
	if l.samples < max(l.allowed(), RoundMin) {
		return
	}
	switch {
	case l.smoothed > Tolerance*l.floor:
		l.limit = max(1, l.limit*decrease)
	case l.demand:
		l.limit = min(float64(l.max), l.limit+1)
	}
	l.samples, l.demand = 0, false
	l.grant()
}

// Limit returns how many permits may be out at once now.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.allowed()
}

// InUse returns how many permits are out.
func (l *Limiter) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inUse
}

// Waiting returns how many Acquire calls wait for a permit.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}

// Floor returns the floor the latency is compared with (0 before the
// first sample).
func (l *Limiter) Floor() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.floor)
}

func (l *Limiter) allowed() int { return int(l.limit) }

// grant hands permits to the waiters, first come first served, while the
// limit allows. Called with mu held.
func (l *Limiter) grant() {
	for len(l.waiters) > 0 && l.inUse < l.allowed() {
		close(l.waiters[0])
		l.waiters = l.waiters[1:]
		l.inUse++
	}
	if l.inUse < l.allowed() {
		close(l.wake)
		l.wake = make(chan struct{})
	}
}
