package receiver

import (
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// unverified accounts for the requests whose signature is not known yet:
// the bytes their bodies hold, in all and per client, and how many of them
// each client has. An unauthenticated client can make the receiver hold no
// more than these, whatever it sends.
//
// When a limit is reached, the body furthest behind the minimum rate's
// schedule is cut to make room (see cutSlowest), so that one address
// sending bodies slowly cannot lock out a sender at normal speed on the
// same address: a proxy that does not pass the client address, NAT, or a
// shared egress.
type unverified struct {
	mu        sync.Mutex
	maxBytes  int64 // in all
	maxShare  int64 // per client: half of maxBytes
	perClient int   // requests per client
	// minRate (bytes/s) is the schedule a body's lag is measured against;
	// a body ahead of it may be cut only once it is grace old.
	minRate int64
	grace   time.Duration
	held    int64
	clients map[netip.Addr]*clientHold
	holds   map[*hold]struct{} // every hold not released
}

// clientHold is what one client address holds.
type clientHold struct {
	requests int
	bytes    int64
}

func newUnverified(maxBytes int64, perClient int, minRate int64, grace time.Duration) *unverified {
	return &unverified{maxBytes: maxBytes, maxShare: maxBytes / 2, perClient: perClient, minRate: minRate, grace: grace,
		clients: map[netip.Addr]*clientHold{}, holds: map[*hold]struct{}{}}
}

// hold is one request's claim on the unverified budget. Its methods are
// called from the request's goroutine only; cut may end it from another.
type hold struct {
	u     *unverified
	addr  netip.Addr
	begin time.Time
	// Under u.mu.
	bytes    int64
	released bool
	// got counts the body bytes received so far.
	got atomic.Int64
	// mu orders the reader's deadlines against a cut: once cut is set, the
	// read deadline stays in the past.
	mu sync.Mutex
	rc *http.ResponseController
	// reading: the body's first read has begun and the last has not
	// ended. Written under mu.
	reading atomic.Bool
	cut     bool
}

// enter admits one more unverified request from addr, whose body will be
// read through rc. When addr already has perClient of them, the one of
// addr's bodies furthest behind the minimum rate's schedule is cut to make
// room; enter reports false when there is none to cut.
func (u *unverified) enter(addr netip.Addr, rc *http.ResponseController, now time.Time) (*hold, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.clients[addr]
	if c == nil {
		c = &clientHold{}
		u.clients[addr] = c
	}
	if c.requests >= u.perClient && !u.cutSlowest(now, nil, func(v *hold) bool { return v.addr == addr }) {
		return nil, false
	}
	c.requests++
	h := &hold{u: u, addr: addr, begin: now, rc: rc}
	u.holds[h] = struct{}{}
	return h, true
}

// reserve claims n more bytes. When they would take the budget, or this
// client's half of it, over the limit, the bodies furthest behind the
// minimum rate's schedule (of any client, or of this one) are cut until
// they fit; once h holds bytes, only bodies further behind than h's own
// are. It reports false when they cannot be made to fit.
func (h *hold) reserve(n int64, now time.Time) bool {
	u := h.u
	u.mu.Lock()
	defer u.mu.Unlock()
	if h.released || n > u.maxShare {
		return false
	}
	var self *hold
	if h.bytes > 0 {
		self = h // growing: only a body slower than this one makes room
	}
	c := u.clients[h.addr]
	for c.bytes+n > u.maxShare {
		if !u.cutSlowest(now, self, func(v *hold) bool { return v != h && v.addr == h.addr }) {
			return false
		}
	}
	for u.held+n > u.maxBytes {
		if !u.cutSlowest(now, self, func(v *hold) bool { return v != h }) {
			return false
		}
	}
	u.held += n
	c.bytes += n
	h.bytes += n
	return true
}

// lag is how far h's body is behind the minimum rate's schedule at now,
// counted from the request's start: minRate × its age − the bytes
// received. A trickling body's lag grows with its age; a body arriving at
// normal speed is ahead (negative); a request just admitted is near 0.
func (h *hold) lag(now time.Time) float64 {
	return float64(h.u.minRate)*now.Sub(h.begin).Seconds() - float64(h.got.Load())
}

// cuttable reports whether h may be cut at now: its body is being read,
// and it is behind the schedule or has had its grace. A request whose
// first read has not begun is never cut: a body that came with the
// headers is read whole by that read, so a delivery at normal speed cannot
// be cut while it waits for a CPU on a loaded machine.
func (h *hold) cuttable(now time.Time) bool {
	return h.reading.Load() && (h.lag(now) > 0 || now.Sub(h.begin) >= h.u.grace)
}

// cutSlowest cuts the cuttable hold that match accepts with the largest
// lag, larger than than's when than is set, and reports whether it cut one.
// The caller holds u.mu.
//
// The victim is the body furthest behind min_body_rate's schedule: the
// oldest with the least progress. A body behind the schedule is cut
// whatever its age, so a stream of new requests cannot keep every body
// too young to cut; one just admitted lags least among those behind, so
// it is cut last. A body keeping ahead of the schedule is cut only after
// the grace, the time every body gets before the minimum rate counts.
func (u *unverified) cutSlowest(now time.Time, than *hold, match func(*hold) bool) bool {
	for {
		victim := u.slowest(now, than, match)
		if victim == nil {
			return false
		}
		if u.cut(victim) {
			return true
		}
	}
}

// slowest is cutSlowest's choice, or nil. The caller holds u.mu.
func (u *unverified) slowest(now time.Time, than *hold, match func(*hold) bool) *hold {
	var victim *hold
	var most float64
	floor := 0.0
	if than != nil {
		floor = than.lag(now)
	}
	for h := range u.holds {
		if !match(h) || !h.cuttable(now) {
			continue
		}
		lag := h.lag(now)
		if than != nil && lag <= floor {
			continue
		}
		if victim == nil || lag > most {
			victim, most = h, lag
		}
	}
	return victim
}

// cut ends h's read at once and gives back what it holds, or reports false
// when its body is no longer being read. The caller holds u.mu; the lock
// order is connLimiter.mu, unverified.mu, hold.mu.
func (u *unverified) cut(h *hold) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || !h.reading.Load() {
		return false // read whole (being verified), or done
	}
	h.cut = true
	h.reading.Store(false)
	if h.rc != nil {
		_ = h.rc.SetReadDeadline(longAgo)
	}
	u.releaseLocked(h)
	return true
}

// longAgo is a read deadline in the past: a read blocked on it returns at
// once.
var longAgo = time.Unix(1, 0)

// setReadDeadline moves the read deadline of h's body to d before a read,
// unless h was cut; it reports false then.
func (h *hold) setReadDeadline(d time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cut {
		return false
	}
	h.reading.Store(true)
	if h.rc != nil {
		_ = h.rc.SetReadDeadline(d)
	}
	return true
}

// received counts n more body bytes.
func (h *hold) received(n int) { h.got.Add(int64(n)) }

// finish ends the read of h's body: it can no longer be cut. It reports
// false when it was cut first.
func (h *hold) finish() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cut {
		return false
	}
	h.reading.Store(false)
	return true
}

// wasCut reports whether h was cut to make room.
func (h *hold) wasCut() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cut
}

// release gives back everything h holds; later calls do nothing.
func (h *hold) release() {
	if h == nil {
		return
	}
	h.u.mu.Lock()
	defer h.u.mu.Unlock()
	h.u.releaseLocked(h)
}

// releaseLocked is release; the caller holds u.mu.
func (u *unverified) releaseLocked(h *hold) {
	if h.released {
		return
	}
	h.released = true
	delete(u.holds, h)
	u.held -= h.bytes
	c := u.clients[h.addr]
	c.bytes -= h.bytes
	c.requests--
	if c.requests == 0 {
		delete(u.clients, h.addr)
	}
}
