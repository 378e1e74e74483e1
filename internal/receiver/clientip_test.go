package receiver

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClientIP(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"PeerWithoutProxies", "203.0.113.7:5555", nil, nil, "203.0.113.7"},
		{"ForwardedForIgnoredFromUntrustedPeer", "203.0.113.7:5555", []string{"198.51.100.1"}, proxies, "203.0.113.7"},
		{"ForwardedForIgnoredWhenNoProxyTrusted", "10.1.1.1:5555", []string{"198.51.100.1"}, nil, "10.1.1.1"},
		{"TrustedPeerForwardsClient", "10.1.1.1:5555", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"RightmostUntrustedHopWins", "10.1.1.1:5555", []string{"6.6.6.6, 198.51.100.1, 10.2.2.2"}, proxies, "198.51.100.1"},
		{"SeveralHeaderLines", "10.1.1.1:5555", []string{"6.6.6.6", "198.51.100.1"}, proxies, "198.51.100.1"},
		{"OnlyProxiesMeansPeer", "10.1.1.1:5555", []string{"10.3.3.3"}, proxies, "10.1.1.1"},
		{"MalformedHopBelievesNothing", "10.1.1.1:5555", []string{"6.6.6.6, not-an-ip"}, proxies, "invalid IP"},
		{"IPv4MappedIPv6Peer", "[::ffff:203.0.113.7]:5555", nil, nil, "203.0.113.7"},
		{"IPv6Peer", "[2001:db8::1]:5555", nil, nil, "2001:db8::1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			require.Equal(t, tc.want, clientIP(r, tc.trusted).String())
		})
	}
}

func TestAllowed(t *testing.T) {
	t.Parallel()
	nets := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	require.True(t, allowed(netip.MustParseAddr("192.0.2.200"), nets))
	require.True(t, allowed(netip.MustParseAddr("2001:db8::5"), nets))
	require.False(t, allowed(netip.MustParseAddr("192.0.3.1"), nets))
	require.False(t, allowed(netip.Addr{}, nets), "an unknown address is never allowed")
}
