package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/hostile"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// The receiver's limits in the attack tests, small so that the memory
// bound is tight and the attacks reach every limit with few connections.
// Each attack comes from one address (127.0.0.1), the legit client from
// another (hostile.LegitAddr): an attacker holds at most
// attackMaxConnectionsPerClient connections, which leaves the legit client
// (at most hostile.LegitMaxConnsDefault connections, as a provider's
// sender pool) the rest of attackMaxConnections, and its own per-address
// cap is never reached, so no legit connection is refused or closed, and
// at most attackUnverifiedPerClient requests being read, which the legit
// client's bodies (a few hundred bytes, read and verified at once) never
// approach. What the rows below assert holds by these limits, not by how
// fast the machine runs.
const (
	attackUnverifiedBytes         = 8 << 20
	attackMaxConnections          = 256
	attackMaxConnectionsPerClient = attackMaxConnections / 4
	attackUnverifiedPerClient     = 32
	attackMaxHeaderBytes          = 32 << 10
)

// attackMemoryBound is README's memory formula for the limits above:
// 64 MiB of runtime, pool and code, plus twice (the garbage collector's
// headroom at GOGC=100) what clients can make the receiver hold: the
// unverified-body budget and, per connection, 64 KiB (goroutine stack,
// buffers) and twice the header limit.
// legitTimeout bounds each legit delivery in the attack tests: long
// enough that only a delivery the receiver never answers reaches it, on a
// machine as busy as CI's.
const legitTimeout = 45 * time.Second

const attackMemoryBound = 64<<20 + 2*(attackUnverifiedBytes+attackMaxConnections*(64<<10+2*attackMaxHeaderBytes))

// TestReceiverUnderAttack runs each of issue 10's attacks, small, against
// the real receiver binary. Once the attack has reached the limit it is
// aimed at (a line in the receiver's log says so), a legit client sends a
// signed Stripe delivery every 10 ms from another loopback address: every
// legit delivery but at most 1 % must be answered 2xx (or, where the
// machine costs its unattacked twin more, at most 1 % fewer than the twin
// answered), and the receiver's
// peak RSS must stay under the memory formula. What fails a legit delivery
// here is a refusal, a closed connection or an error answer, which the
// limits above rule out for the legit address; not its latency. A second
// legit client meanwhile sends to a twin receiver nobody attacks; both
// latencies are logged, not compared: on 2 cores shared with the rest of
// the suite under -race, the attacked receiver's p99 ran 3.4 s over its
// twin's once (5.8 s against 2.4 s, every delivery answered 2xx), and a
// busier machine left 5 of 200 legit deliveries unanswered after 10 s
// while the twin answered all, so neither a bound on the difference nor a
// provider-sized timeout would hold by construction. The legit client's
// timeout (legitTimeout) is the test's patience, not a latency target:
// latency under attack is a figure of make faults (scenario 5, at full
// size), not an assertion here.
func TestReceiverUnderAttack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemons")
	}

	for _, tc := range []struct {
		attack hostile.Attack
		// reached are log lines that show the attack at full weight; the
		// legit client starts once they are all in the receiver's log.
		reached [][]string
		check   func(t *testing.T, p *proctest.Process, ar *hostile.Result, elapsed time.Duration)
	}{
		// Bodies that trickle hold no max_in_flight slot and are cut at
		// min_body_rate after a grace second, or sooner to make room. 96
		// connections from one address: at the address's 64 connections,
		// or its 32 requests in the unverified phase, the body furthest
		// behind min_body_rate's schedule is cut (slowest_cut) for the
		// newcomer. Bodies of 100 KB: 32 of them fit in the address's
		// half of the budget, so the request cap is reached first.
		{attack: hostile.Attack{Kind: hostile.SlowBody, Path: "/webhooks/stripe", Conns: 96, BodyBytes: 100_000, Rate: 10, MaxRequests: 20},
			reached: [][]string{{`"reason":"slowest_cut"`}}},
		// Unsigned bodies at the limit fill the unverified budget (one
		// address: half of it), not memory: 24 bodies of 4 MiB cannot fit
		// in 4 MiB.
		{attack: hostile.Attack{Kind: hostile.BigBody, Path: "/webhooks/github", Conns: 24, BodyBytes: 4 << 20, MaxRequests: 20},
			reached: [][]string{{`"reason":"unverified_budget"`}}},
		// Header lines of 256 KiB, 8 times max_header_bytes, get 431; 100
		// connections that keep sending them reach the address's
		// connection cap.
		{attack: hostile.Attack{Kind: hostile.BigHeader, Path: "/webhooks/stripe", Conns: 100, HeaderBytes: 256 << 10, MaxRequests: 20},
			reached: [][]string{{`"msg":"client connection refused"`}},
			check: func(t *testing.T, _ *proctest.Process, ar *hostile.Result, _ time.Duration) {
				t.Helper()
				ar.Lock()
				defer ar.Unlock()
				require.Positive(t, ar.Answers[431], ar.Answers)
			}},
		// Idle keep-alive connections: one address keeps no more than its
		// cap open, whatever their age.
		{attack: hostile.Attack{Kind: hostile.Idle, Path: "/webhooks/stripe", Conns: 3 * attackMaxConnections},
			reached: [][]string{{`"msg":"client connection refused"`}},
			check: func(t *testing.T, _ *proctest.Process, ar *hostile.Result, _ time.Duration) {
				t.Helper()
				require.LessOrEqual(t, ar.Open.Load(), int64(attackMaxConnectionsPerClient), "idle connections still open")
			}},
		// A flood of unsigned deliveries is logged sampled.
		{attack: hostile.Attack{Kind: hostile.Flood, Path: "/webhooks/stripe", Conns: 8, MaxRequests: 100_000},
			reached: [][]string{{`"reason":"signature"`}},
			check: func(t *testing.T, p *proctest.Process, _ *hostile.Result, elapsed time.Duration) {
				t.Helper()
				p.WaitLine(t, `"msg":"rejections suppressed"`, `"reason":"signature"`)
				refusals := strings.Count(p.Log(), `"reason":"signature"`)
				// At most 10 lines and a summary per second, plus the
				// interval under way at either end.
				bound := 11 * (int(elapsed/time.Second) + 3)
				require.LessOrEqual(t, refusals, bound, "refusal lines in %s", elapsed)
			}},
	} {
		t.Run(string(tc.attack.Kind), func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t)
			config := writeConfig(t, fmt.Sprintf(`
# Ten of these receivers run at once, beside other packages' tests: a small
# pool each keeps the shared server's max_connections (100) out of reach.
database: {url: %q, max_conns: 4}
log: {level: info}
receiver:
  listen: 127.0.0.1:0
  batch_flushers: 2
  max_unverified_bytes: %d
  max_unverified_per_client: %d
  max_connections: %d
  max_connections_per_client: %d
  max_header_bytes: %d
sources:
  - {name: stripe, provider: stripe, secrets: [%q]}
  - {name: github, provider: github, secrets: [github_secret], max_body_bytes: %d}
`, db.URL, attackUnverifiedBytes, attackUnverifiedPerClient, attackMaxConnections, attackMaxConnectionsPerClient,
				attackMaxHeaderBytes, secret, attackUnverifiedBytes/2-1))
			p := start(t, "receiver", "--config", config)
			addr := listenAddr(t, p, "receiver")
			p.WaitLine(t, "receiver accepting webhooks")
			twin := start(t, "receiver", "--config", config)
			twinAddr := listenAddr(t, twin, "receiver")
			twin.WaitLine(t, "receiver accepting webhooks")

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute+legitTimeout)
			defer cancel()
			a := tc.attack
			a.Addr = addr
			attacked, err := a.Launch(ctx)
			require.NoError(t, err, "the attack's connections did not open within a minute")
			for _, line := range tc.reached {
				p.WaitLine(t, line...)
			}
			legit := &hostile.Legit{URL: "http://" + addr + "/webhooks/stripe", Secret: secret, Every: 10 * time.Millisecond, Count: 200, Timeout: legitTimeout}
			control := *legit
			control.URL = "http://" + twinAddr + "/webhooks/stripe"
			controlled := make(chan *hostile.LegitResult, 1)
			go func() { controlled <- control.Run(ctx) }()
			began := time.Now()
			lr := legit.Run(ctx)
			elapsed := time.Since(began)
			cr := <-controlled
			cancel()
			ar := <-attacked
			hwm, err := hostile.PeakRSS(p.PID())
			require.NoError(t, err)
			t.Logf("%s; unattacked twin: %s; attack: %s; receiver peak RSS %d MiB (bound %d MiB)", lr, cr, ar, hwm>>20, attackMemoryBound>>20)

			require.Equal(t, legit.Count, lr.Sent)
			// The attack may cost at most 1 % of the legit deliveries. What
			// the machine costs both receivers alike is not the attack's (at
			// load 20, the attacked receiver and its twin each answered 195
			// of 200 once), so the floor is the twin's share when that is
			// lower than 99 %.
			require.GreaterOrEqual(t, lr.Success(), min(0.99, cr.Success())-0.01, "%s; unattacked twin: %s", lr, cr)
			require.LessOrEqual(t, hwm, int64(attackMemoryBound), "receiver peak RSS")
			if tc.check != nil {
				tc.check(t, p, ar, elapsed)
			}
		})
	}
}
