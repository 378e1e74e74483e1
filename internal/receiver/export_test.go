package receiver

import (
	"net/http"
	"net/netip"
	"sync"
)

// servers maps each Server's Handler to the Server, for ServerOf.
var servers sync.Map

func init() {
	built = func(s *Server) { servers.Store(s.Handler(), s) }
}

// ServerOf returns the Server whose Handler is h: the receiver's server
// inside a *daemon.Receiver, which does not name it.
func ServerOf(h http.Handler) *Server {
	s, ok := servers.Load(h)
	if !ok {
		panic("receiver: no Server of this handler was built")
	}
	return s.(*Server)
}

// Unverified returns how many requests from the client address addr are in
// the unverified phase with their body being read, and the body bytes they
// have received, for tests that must wait for a request to be there.
func (s *Server) Unverified(addr string) (requests int, received int64) {
	a := netip.MustParseAddr(addr)
	s.unverified.mu.Lock()
	defer s.unverified.mu.Unlock()
	for h := range s.unverified.holds {
		if h.addr == a && h.reading.Load() {
			requests++
			received += h.got.Load()
		}
	}
	return requests, received
}
