package receiver

import "net/netip"

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
