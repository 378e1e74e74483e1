package faults_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
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
	_, err := db.Pool.Exec(context.Background(), soakSlowStart)
	require.NoError(t, err)
	_, err = db.Pool.Exec(context.Background(), `INSERT INTO soak_slow_start VALUES ('slow_start')`)
	require.NoError(t, err)
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", "slow_start")
	u.RawQuery = q.Encode()
	w, _ := startWorker(t, setup{DB: u.String()}.write(t))
	w.WaitLine(t, "could not start the worker; retrying", riversStartTimedOut)
	w.WaitLine(t, "worker started")
	w.Stop(t)
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
