package receiver

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientIP returns the delivering client's address: the TCP peer, or, when
// the peer is a trusted proxy, the right-most X-Forwarded-For entry that is
// not itself a trusted proxy. Entries left of that one could be forged by
// the client and are never believed.
func clientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if !allowed(peer, trusted) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		addr, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return netip.Addr{} // a malformed hop: believe nothing
		}
		addr = addr.Unmap()
		if !allowed(addr, trusted) {
			return addr
		}
	}
	return peer
}

// allowed reports whether addr lies in one of the networks.
func allowed(addr netip.Addr, networks []netip.Prefix) bool {
	if !addr.IsValid() {
		return false
	}
	for _, n := range networks {
		if n.Contains(addr) {
			return true
		}
	}
	return false
}
