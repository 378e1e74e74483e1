package receiver_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/config"
)

// TestSlowestBodyMakesRoom is the door where no client address can be
// known: every request comes from one address (127.0.0.1), as through a
// proxy that is not trusted, NAT, or a load balancer that does not pass
// the address. Slow bodies fill a limit; a legit delivery at normal speed
// still gets 2xx, because the body furthest behind min_body_rate's
// schedule (here: the oldest stalled one) is cut to make room, rather than
// the newest request being refused.
func TestSlowestBodyMakesRoom(t *testing.T) {
	t.Parallel()
	const from = "127.0.0.1"

	// stall opens n stalled bodies of size bytes from one address, one
	// after another (their ages differ), each in the unverified phase
	// before the next.
	stall := func(t *testing.T, b *servedBundle, n, size int) []net.Conn {
		t.Helper()
		var conns []net.Conn
		for i := range n {
			conns = append(conns, slowBody(t, b.addr, from, fmt.Sprintf("slow-%d", i), size, 0))
			b.waitUnverified(t, from, i+1, 0)
		}
		return conns
	}
	// legitGets2xx sends a signed delivery from the same address.
	legitGets2xx := func(t *testing.T, b *servedBundle, id string) {
		t.Helper()
		header, body := delivery(t, id)
		status, err := sendFrom(from, "http://"+b.addr, id, header, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
	}
	// oldestWasCut checks that the first stalled body got 503 and the
	// others still wait.
	oldestWasCut := func(t *testing.T, stalled []net.Conn) {
		t.Helper()
		status, err := answerOn(stalled[0], 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, status)
		for _, conn := range stalled[1:] {
			pending(t, conn)
		}
	}

	t.Run("AtMaxUnverifiedPerClient", func(t *testing.T) {
		t.Parallel()
		b := setupServed(t, func(r *config.ReceiverConfig) {
			r.MaxUnverifiedPerClient = 4
			r.BodyGrace = time.Minute
		})
		stalled := stall(t, b, 4, 1000)
		legitGets2xx(t, b, "evt_per_client")
		oldestWasCut(t, stalled)
		require.Equal(t, [][2]string{{from, "slow-0"}}, b.refusals("slowest_cut"))
	})

	t.Run("AtMaxUnverifiedBytes", func(t *testing.T) {
		t.Parallel()
		const limit = 100_000
		b := setupServed(t, func(r *config.ReceiverConfig) {
			r.MaxBodyBytes = limit
			// One address's half holds two bodies at the limit.
			r.MaxUnverifiedBytes = 4 * (limit + 1)
			r.BodyGrace = time.Minute
		})
		stalled := stall(t, b, 2, limit)
		legitGets2xx(t, b, "evt_bytes")
		oldestWasCut(t, stalled)
		require.Equal(t, [][2]string{{from, "slow-0"}}, b.refusals("slowest_cut"))
	})

	t.Run("AtMaxConnectionsPerClient", func(t *testing.T) {
		t.Parallel()
		b := setupServed(t, func(r *config.ReceiverConfig) {
			r.MaxConnections = 16
			r.MaxConnectionsPerClient = 4
			r.BodyGrace = time.Minute
		})
		stalled := stall(t, b, 4, 1000)
		// The new connection replaces the stalled body's: closed, its
		// request cut, with no answer.
		legitGets2xx(t, b, "evt_conns")
		_, err := answerOn(stalled[0], 10*time.Second)
		require.Error(t, err)
		for _, conn := range stalled[1:] {
			pending(t, conn)
		}
		require.Eventually(t, func() bool { return len(b.refusals("slowest_cut")) == 1 }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, [][2]string{{from, "slow-0"}}, b.refusals("slowest_cut"))
	})

	t.Run("BodiesAheadOfTheScheduleAreNotCut", func(t *testing.T) {
		t.Parallel()
		b := setupServed(t, func(r *config.ReceiverConfig) {
			r.MaxUnverifiedPerClient = 2
			r.BodyGrace = time.Minute
		})
		// Two bodies of which all but a byte came: ahead of min_body_rate's
		// schedule for a minute, and within the grace.
		const size = 500_000
		for i := range 2 {
			slowBody(t, b.addr, from, fmt.Sprintf("ahead-%d", i), size, size-1)
		}
		b.waitUnverified(t, from, 2, 2*(size-1))
		header, body := delivery(t, "evt_refused")
		status, err := sendFrom(from, "http://"+b.addr, "evt_refused", header, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Empty(t, b.refusals("slowest_cut"))
		require.Len(t, b.refusals("client_busy"), 1)
	})
}
