package receiver_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/receiver"
)

func TestConnectionCaps(t *testing.T) {
	t.Parallel()

	// testBundle is a server within the caps whose handler holds every
	// request in progress until the test ends.
	type testBundle struct {
		addr    string
		entered chan struct{} // a request reached the handler
	}
	setup := func(t *testing.T, config *receiver.HTTPConfig) *testBundle {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		bundle := &testBundle{addr: ln.Addr().String(), entered: make(chan struct{}, 16)}
		release := make(chan struct{})
		srv, limited := receiver.NewHTTPServer(ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			bundle.entered <- struct{}{}
			<-release
		}), config)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(limited) }()
		t.Cleanup(func() {
			close(release)
			require.NoError(t, srv.Close())
			require.ErrorIs(t, <-served, http.ErrServerClosed)
		})
		return bundle
	}
	// dial opens a connection from the loopback address from.
	dial := func(t *testing.T, b *testBundle, from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		conn, err := d.Dial("tcp", b.addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	// busy opens a connection from the address from, whose request is in
	// progress once this returns: such a connection is never closed to
	// make room.
	busy := func(t *testing.T, b *testBundle, from string) {
		t.Helper()
		conn := dial(t, b, from)
		_, err := io.WriteString(conn, "POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
		require.NoError(t, err)
		<-b.entered
	}
	// refused opens a connection from the address from and returns the body
	// of the 503 it must get at once.
	refused := func(t *testing.T, b *testBundle, from string) string {
		t.Helper()
		resp, err := http.ReadResponse(bufio.NewReader(dial(t, b, from)), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "5", resp.Header.Get("Retry-After"))
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(body)
	}

	t.Run("OneAddressCannotTakeEveryConnection", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &receiver.HTTPConfig{MaxConnections: 4, MaxConnectionsPerClient: 2})

		busy(t, b, "127.0.0.1")
		busy(t, b, "127.0.0.1")
		require.JSONEq(t, `{"error":"too many connections from this address; retry later"}`, refused(t, b, "127.0.0.1"))
		// Another address still gets in, up to the cap on all.
		busy(t, b, "127.0.0.2")
		busy(t, b, "127.0.0.3")
		require.JSONEq(t, `{"error":"too many connections; retry later"}`, refused(t, b, "127.0.0.4"))
	})

	t.Run("TrustedProxyConnectionsAreNotCountedPerClient", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &receiver.HTTPConfig{MaxConnections: 3, MaxConnectionsPerClient: 1,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})

		busy(t, b, "127.0.0.1")
		busy(t, b, "127.0.0.1")
		busy(t, b, "127.0.0.1")
		require.JSONEq(t, `{"error":"too many connections; retry later"}`, refused(t, b, "127.0.0.1"))
	})

	t.Run("DefaultsToAQuarterOfTheConnections", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &receiver.HTTPConfig{MaxConnections: 8})

		busy(t, b, "127.0.0.1")
		busy(t, b, "127.0.0.1")
		require.JSONEq(t, `{"error":"too many connections from this address; retry later"}`, refused(t, b, "127.0.0.1"))
	})
}
