package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/webhook"
)

// TestWorkerStartWithoutConnections is the regression test of the one
// product fix the suite needed (scenario 4 found it): a worker that finds
// the database at start-up but then cannot open another connection while
// it starts River (every connection taken) must retry, not exit.
//
// By construction: the worker reaches PostgreSQL through a gate that lets
// one connection through and closes every later one at once. The schema
// check succeeds on the first; starting the worker needs more, so the start
// fails with a connection error, which the worker must log and retry. Then
// the gate opens and the worker must start.
func TestWorkerStartWithoutConnections(t *testing.T) {
	t.Parallel()
	db := ledgerDB(t)
	gate, gated := newConnGate(t, db.URL, 1)
	w, _ := startWorker(t, setup{DB: gated}.write(t))
	w.WaitLine(t, "database ready")
	w.WaitLine(t, "could not start the worker; retrying")
	gate.open()
	w.WaitLine(t, "worker started")
	w.Stop(t)
}

// TestWorkerStartOutlastsRiversTimeout: a worker whose River start runs
// out of River's own time (a queue's settings not written within 10 s: a
// server recovering from a restart on a busy machine, the row locked) must
// retry, not exit (the 30-minute soak, seed 101, found it exiting:
// "start worker: producer.StartWorkContext timed out after 10s").
//
// By construction: the soak's trigger on River's queue table sleeps past
// River's bound in the worker's first write to it, which is the start's.
func TestWorkerStartOutlastsRiversTimeout(t *testing.T) {
	t.Parallel()
	db := ledgerDB(t)
	w, _ := startWorker(t, setup{DB: slowStart(t, db.Pool, db.URL, 1)}.write(t))
	w.WaitLine(t, "could not start the worker; retrying", riversStartTimedOut)
	w.WaitLine(t, "worker started")
	w.Stop(t)
}

// TestWorkerRenewsItsRecordThroughASlowStart: the rollout loop renews a
// worker's routes record while River's client starts, however long that
// takes. It waited for the worker's lock, which Start holds meanwhile:
// with a heartbeat shorter than a third of River's 10-s bound, a worker
// whose start ran into it let its record expire, fenced itself, and its
// queues were dead to the reaper, which moved their jobs away (the soak's
// slow-start scene found it so; a waiting route set would have taken
// them over).
//
// By construction: a 2-s heartbeat (the record lives 6 s past a
// renewal), and the worker's first write to River's queue table sleeps
// past River's bound, so that its start runs 10 s. Read every 100 ms from
// its claim until it started, its record must never be expired.
func TestWorkerRenewsItsRecordThroughASlowStart(t *testing.T) {
	t.Parallel()
	db := ledgerDB(t)
	w, _ := startWorker(t, setup{DB: slowStart(t, db.Pool, db.URL, 1), Worker: "heartbeat_interval: 2s"}.write(t))
	ctx := context.Background()
	seen, expired := 0, 0
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(w.Log(), `"msg":"worker started"`); {
		w.RequireRunning(t)
		require.True(t, time.Now().Before(deadline), "the worker did not start")
		var live bool
		err := db.Pool.QueryRow(ctx, `SELECT expires_at > now() FROM hookinbox_worker_routes WHERE pid = $1`, w.PID()).Scan(&live)
		if !errors.Is(err, pgx.ErrNoRows) {
			require.NoError(t, err)
			seen++
			if !live {
				expired++
			}
		}
		<-time.After(100 * time.Millisecond) // the reading's pace
	}
	require.Contains(t, w.Log(), riversStartTimedOut, "the start never ran out of River's time: the test checked nothing")
	require.Positive(t, seen, "the worker's record was never read")
	require.Zero(t, expired, "the worker's routes record expired while River's start ran (%d readings of %d)", expired, seen)
	w.Stop(t)
}

// TestARunRiversFailedStartCutIsNotCharged: River starts a worker's queues
// one at a time; when a later queue's start fails (here its row's write
// runs out of River's 10 s), River cancels the jobs the earlier queues
// began, with the start's error as the cause, and counts each an attempt
// (it spares its own stop's alone). The worker starts again, so a slow
// database cut an event's runs every 10 s until River discarded it and
// the reaper failed a row whose handler never failed (a helper's attack on
// 238d73a). Such a run must be put back uncharged.
//
// By construction: two queues, an event on each, whose handler waits on a
// gate the test holds; the second queue row's write sleeps past River's
// bound, so whichever queue starts first runs its event into the cut.
func TestARunRiversFailedStartCutIsNotCharged(t *testing.T) {
	t.Parallel()
	b := newPromiseBundle(t)
	ctx := context.Background()
	source := func(name, queue string) string {
		return fmt.Sprintf(`{name: %s, provider: standardwebhooks, secrets: [%q], queue: %s}`, name, secret, queue)
	}
	cfg := promises{DB: slowStart(t, b.db.Pool, b.db.URL, 2),
		Sources: []string{source("bank", "qa"), source("card", "qb")},
		Routes:  []string{`{source: bank, handlers: [gate]}`, `{source: card, handlers: [gate]}`},
		Worker:  []string{`queues: [qa, qb]`, `max_attempts: 2`},
	}.write(t)
	_, base := b.startReceiver(t, cfg)
	gate, err := pgx.Connect(ctx, b.db.URL)
	require.NoError(t, err)
	defer gate.Close(ctx)
	_, err = gate.Exec(ctx, `SELECT pg_advisory_lock($1)`, gateLock)
	require.NoError(t, err)
	deliver, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, source := range []string{"bank", "card"} {
		require.NoError(t, deliverUntil2xx(deliver, func() (*http.Request, error) {
			return webhook.NewRequest(deliver, base+"/webhooks/"+source, &webhook.Params{Provider: "standardwebhooks", Secret: secret,
				EventID: "ev_" + source, EventType: faults.DepositType, Time: time.Now(), Body: []byte(`{"amount":1}`)})
		}))
	}

	// startWorker waits for "worker started", after the failed start.
	w := b.startWorker(t, "w", cfg)
	require.Contains(t, w.Log(), riversStartTimedOut)
	_, err = gate.Exec(ctx, `SELECT pg_advisory_unlock($1)`, gateLock)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var pending int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status <> 'done'`).Scan(&pending)
		return err == nil && pending == 0
	}, 2*time.Minute, 50*time.Millisecond, "the events were not done")
	var attempts, riverErrors int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (SELECT max(attempts) FROM webhook_inbox),
  (SELECT coalesce(sum(cardinality(errors)), 0) FROM river_job WHERE kind = 'hookinbox.event')`).Scan(&attempts, &riverErrors))
	require.Equal(t, 1, attempts, "each event done at its first attempt")
	require.Zero(t, riverErrors, "River counted an attempt for a run its failed start cut")
	require.Contains(t, w.Log(), "event put back, no attempt counted: River's start failed under it", "no run was cut: the test checked nothing")
	w.Stop(t)
}

// slowStart arms soakSlowStart on the database of pool and dbURL: the nth
// write to river_queue of a client connecting with the URL it returns
// sleeps past River's bound.
func slowStart(t *testing.T, pool *pgxpool.Pool, dbURL string, nth int) string {
	t.Helper()
	_, err := pool.Exec(context.Background(), soakSlowStart)
	require.NoError(t, err)
	armSlowStart(t, pool, "slow_start", nth)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", "slow_start")
	u.RawQuery = q.Encode()
	return u.String()
}

// connGate is a TCP proxy in front of PostgreSQL that lets a budget of
// connections through and closes every later one, until opened.
type connGate struct {
	budget atomic.Int64
	opened atomic.Bool
}

func newConnGate(t *testing.T, dbURL string, budget int64) (*connGate, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	target := u.Host
	g := &connGate{}
	g.budget.Store(budget)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !g.opened.Load() && g.budget.Add(-1) < 0 {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	return g, u.String()
}

// open lets every later connection through.
func (g *connGate) open() { g.opened.Store(true) }
