package faults_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/hostile"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// hostileMemoryBound is README's bound on the receiver's peak RSS with the
// default limits: 64 MiB + 2 × (64 MiB + 2,048 × 128 KiB).
const hostileMemoryBound = 704 << 20

// TestHostileClients is scenario 5: issue 10's attacks at full size (the
// sizes of scripts/attack.sh), each against a fresh receiver with the
// default limits, while a legit client sends 150 signed Stripe deliveries
// from another loopback address. HOOKINBOX_FAULTS_HOSTILE_SAME_ADDRESS=1
// (make faults FAULTS_HOSTILE_SAME_ADDRESS=1) sends them from the
// attackers' address instead, which the receiver cannot tell from them (a
// proxy it does not trust, NAT): then the legit client must get 99 %.
// HOOKINBOX_FAULTS_HOSTILE_SCALE=N divides every attack's connections by N,
// for a run that fits a shared machine. The receiver must survive each attack,
// keep its peak RSS within README's bound, and answer the legit client: at
// least 90 % of its deliveries 2xx (a legit delivery that times out is
// retried by its provider, so nothing acknowledged is lost; how many time
// out at 10 s follows the machine's load: on a shared 2-core machine, runs
// of the same attack measured 87 % and 100 %). `make test` runs the
// attacks small, against an unattacked twin (pkg/daemon's
// TestReceiverUnderAttack); this scenario runs in `make faults`
// (HOOKINBOX_FAULTS_HOSTILE=1), unless FAULTS_HOSTILE=0.
func TestHostileClients(t *testing.T) { //nolint:tparallel // one attack at a time: each wants the machine to itself
	t.Parallel()
	if os.Getenv("HOOKINBOX_FAULTS_HOSTILE") != "1" {
		t.Skip("full size only, in make faults (HOOKINBOX_FAULTS_HOSTILE=1); pkg/daemon runs the attacks small")
	}
	const stripeSecret = "whsec_attack"
	legitFrom, minSuccess, mode := hostile.LegitAddr, 0.9, ""
	if os.Getenv("HOOKINBOX_FAULTS_HOSTILE_SAME_ADDRESS") == "1" {
		legitFrom, minSuccess, mode = hostile.AttackerAddr, 0.99, ", legit on the attackers' address"
	}
	scale := 1
	if s := os.Getenv("HOOKINBOX_FAULTS_HOSTILE_SCALE"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "HOOKINBOX_FAULTS_HOSTILE_SCALE")
		scale = max(1, n)
		mode += fmt.Sprintf(", connections / %d", scale)
	}
	db := ledgerDB(t)
	config := setup{DB: db.URL, Sources: fmt.Sprintf(`  - {name: stripe, provider: stripe, secrets: [%q]}
  - {name: github, provider: github, secrets: [github_attack]}`, stripeSecret)}.write(t)
	for _, tc := range []struct {
		attack hostile.Attack
		fds    int
	}{
		{hostile.Attack{Kind: hostile.SlowBody, Path: "/webhooks/stripe", Conns: 1100, BodyBytes: 500_000, Rate: 10, MaxRequests: 1000}, 20000},
		{hostile.Attack{Kind: hostile.BigBody, Path: "/webhooks/github", Conns: 64, BodyBytes: 25 << 20, MaxRequests: 1000}, 20000},
		{hostile.Attack{Kind: hostile.BigHeader, Path: "/webhooks/stripe", Conns: 1000, HeaderBytes: 1 << 20, MaxRequests: 1000}, 20000},
		{hostile.Attack{Kind: hostile.Idle, Path: "/webhooks/stripe", Conns: 10000}, 4096},
		{hostile.Attack{Kind: hostile.Flood, Path: "/webhooks/stripe", Conns: 64, MaxRequests: 1_000_000}, 20000},
	} {
		// One after another (no t.Parallel): each attack wants the
		// machine to itself. A row each, OK once its assertions held; a
		// failed attack neither marks the other rows nor stops them.
		t.Run(string(tc.attack.Kind), func(t *testing.T) {
			row := &faults.Row{Scenario: "5 hostile: " + string(tc.attack.Kind) + mode}
			t.Cleanup(func() { table.Add(row) })
			cmd := command("/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" --config "$1"`, tc.fds), receiverBin(t), config)
			p := proctest.Start(t, cmd)
			addr := listenAddr(t, p, "receiver")
			p.WaitLine(t, "receiver accepting webhooks")

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			a := tc.attack
			a.Addr = addr
			a.Conns = max(1, a.Conns/scale)
			attacked, err := a.Launch(ctx)
			require.NoError(t, err, "the attack's connections did not open")
			legit := &hostile.Legit{URL: "http://" + addr + "/webhooks/stripe", Secret: stripeSecret, Every: 100 * time.Millisecond, Count: 150, Timeout: 10 * time.Second, From: legitFrom}
			lr := legit.Run(ctx)
			cancel()
			ar := <-attacked
			p.RequireRunning(t)
			hwm, err := hostile.PeakRSS(p.PID())
			require.NoError(t, err)
			p.Kill(t)
			row.Offered, row.Acked = lr.Sent, lr.OK
			row.Stall = lr.Quantile(1)
			row.Note = fmt.Sprintf("legit p99 %s; receiver peak RSS %d MiB (bound %d); attack: %s",
				lr.Quantile(0.99).Round(time.Millisecond), hwm>>20, hostileMemoryBound>>20, strings.TrimSpace(ar.String()))
			require.Equal(t, legit.Count, lr.Sent)
			require.GreaterOrEqual(t, lr.Success(), minSuccess, "%s: %s", tc.attack.Kind, lr)
			require.LessOrEqual(t, hwm, int64(hostileMemoryBound), "%s: receiver peak RSS", tc.attack.Kind)
			row.OK = true
		})
	}
}
