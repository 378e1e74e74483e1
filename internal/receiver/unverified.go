package receiver

import (
	"net/netip"
	"sync"
)

// unverified accounts for the requests whose signature is not known yet:
// the bytes their bodies hold, in all and per client, and how many of them
// each client has. An unauthenticated client can make the receiver hold no
// more than these, whatever it sends.
type unverified struct {
	mu        sync.Mutex
	maxBytes  int64 // in all
	maxShare  int64 // per client: half of maxBytes
	perClient int   // requests per client
	held      int64
	clients   map[netip.Addr]*clientHold
}

// clientHold is what one client address holds.
type clientHold struct {
	requests int
	bytes    int64
}

func newUnverified(maxBytes int64, perClient int) *unverified {
	return &unverified{maxBytes: maxBytes, maxShare: maxBytes / 2, perClient: perClient, clients: map[netip.Addr]*clientHold{}}
}

// hold is one request's claim on the unverified budget. Its methods are
// called from the request's goroutine only.
type hold struct {
	u        *unverified
	addr     netip.Addr
	bytes    int64
	released bool
}

// enter admits one more unverified request from addr, or reports false when
// addr already has perClient of them.
func (u *unverified) enter(addr netip.Addr) (*hold, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.clients[addr]
	if c == nil {
		c = &clientHold{}
		u.clients[addr] = c
	}
	if c.requests >= u.perClient {
		return nil, false
	}
	c.requests++
	return &hold{u: u, addr: addr}, true
}

// reserve claims n more bytes, or reports false when they would take the
// budget, or this client's half of it, over the limit.
func (h *hold) reserve(n int64) bool {
	u := h.u
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.clients[h.addr]
	if u.held+n > u.maxBytes || c.bytes+n > u.maxShare {
		return false
	}
	u.held += n
	c.bytes += n
	h.bytes += n
	return true
}

// release gives back everything h holds; later calls do nothing.
func (h *hold) release() {
	if h == nil || h.released {
		return
	}
	h.released = true
	u := h.u
	u.mu.Lock()
	defer u.mu.Unlock()
	u.held -= h.bytes
	c := u.clients[h.addr]
	c.bytes -= h.bytes
	c.requests--
	if c.requests == 0 {
		delete(u.clients, h.addr)
	}
}
