package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// stampHold is testdata/stampworker's advisory lock key.
const stampHold = 28

// rolloutConcurrency is the concurrency of the rollout test's workers. They
// work a transaction per event (group_max_events: 1), so that each job in
// flight holds its own row while its handler waits on stampHold, and all
// of them can be seen blocked; in a group, a job waiting for the group's
// permit holds no row yet.
const rolloutConcurrency = 4

// TestRouteChangeRollsOut runs a route change as a Deployment's rolling
// update does, with the real binaries: an old worker (routes v1: bank's
// events to stamp_v1) works under a steady load of new events; a new
// worker (routes v2: bank's events to stamp_v2, and a new source shop) is
// started beside it. The old one's handlers are held on a lock meanwhile,
// so that the new one is, by construction, waiting while the old one
// still runs jobs: it answers /readyz 503 and settles nothing. Once they
// are released the old one finishes them, takes no more, and stays up
// idle and unready; the new one takes over. Every event is settled once,
// each by the routes of the worker that settled it, and no event of the
// old routes was settled after the first of the new.
func TestRouteChangeRollsOut(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs subprocesses")
	}
	bin := testWorkers(t).stamp
	db := dbtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
CREATE TABLE stamps (event_id text NOT NULL, source text NOT NULL, handler text NOT NULL, pid int NOT NULL, at timestamptz NOT NULL)`)
	require.NoError(t, err)
	count := func(where string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM stamps WHERE `+where).Scan(&n))
		return n
	}

	v1 := rolloutConfig(t, db.URL, false, `{source: bank, handlers: [stamp_v1]}`)
	v2 := rolloutConfig(t, db.URL, true, `{source: bank, handlers: [stamp_v2]}`, `{source: shop, handlers: [stamp_v2]}`)
	load := startLoad(t, db)

	old := proctest.Start(t, rolloutCommand(bin, v1))
	oldAddr := workerAddr(t, old)
	old.WaitUntil(t, 60*time.Second, func() bool { return readyz(oldAddr) == http.StatusOK && count(`true`) >= 100 })

	// Hold the old worker's handlers: every job it runs blocks.
	hold, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer hold.Release()
	_, err = hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, stampHold)
	require.NoError(t, err)
	old.WaitUntil(t, 60*time.Second, func() bool {
		return len(dbtest.BlockedJobs(t, db.Pool, inboxstore.JobKind)) == rolloutConcurrency
	})

	startedNew := time.Now()
	next := proctest.Start(t, rolloutCommand(bin, v2))
	nextAddr := workerAddr(t, next)
	next.WaitLine(t, "waiting: a live worker works a queue of this worker with other routes")
	old.WaitLine(t, "a newer route set waits on a queue of this worker")
	// The old worker's jobs are still blocked: it cannot have handed over.
	require.Equal(t, http.StatusServiceUnavailable, readyz(nextAddr), "the waiting worker answers ready")
	require.Equal(t, http.StatusServiceUnavailable, readyz(oldAddr), "the draining worker answers ready")
	require.Len(t, dbtest.BlockedJobs(t, db.Pool, inboxstore.JobKind), rolloutConcurrency)
	require.Zero(t, count(`handler = 'stamp_v2'`), "the waiting worker settled an event")

	_, err = hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, stampHold)
	require.NoError(t, err)
	released := time.Now()
	next.WaitUntil(t, 60*time.Second, func() bool { return readyz(nextAddr) == http.StatusOK })
	takeOver, sinceStart := time.Since(released), time.Since(startedNew)
	old.WaitLine(t, "idle: a newer route set took over this worker's queues")
	next.WaitUntil(t, 60*time.Second, func() bool { return count(`handler = 'stamp_v2'`) >= 100 })
	shop := ingestShop(t, db, 20)
	sent := load.stop(t)

	next.WaitUntil(t, 120*time.Second, func() bool { return count(`true`) >= sent+shop })
	require.Equal(t, http.StatusServiceUnavailable, readyz(oldAddr), "the retired worker answers ready")
	next.Stop(t)
	old.Stop(t)

	var rows, distinct, done, noted int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (source, event_id)) FROM stamps`).Scan(&rows, &distinct))
	require.NoError(t, db.Pool.QueryRow(ctx,
		`SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE note IS NOT NULL OR last_error IS NOT NULL) FROM webhook_inbox`).Scan(&done, &noted))
	byOld, byNew := count(`handler = 'stamp_v1'`), count(`handler = 'stamp_v2'`)
	t.Logf("sent %d bank events and %d shop events: %d settled by the old routes (stamp_v1), %d by the new (stamp_v2), %d duplicates; "+
		"take-over %s after the old worker's jobs were released (%s after the new worker started)",
		sent, shop, byOld, byNew, rows-distinct, takeOver.Round(time.Millisecond), sinceStart.Round(time.Millisecond))
	require.Equal(t, sent+shop, rows, "every event settled exactly once")
	require.Equal(t, rows, distinct, "an event was settled twice")
	require.Equal(t, sent+shop, done)
	require.Zero(t, noted, "an event was settled without a route, or failed")
	require.Equal(t, byOld, count(fmt.Sprintf(`handler = 'stamp_v1' AND pid = %d AND source = 'bank'`, old.PID())), "stamp_v1 ran outside the old worker")
	require.Equal(t, byNew, count(fmt.Sprintf(`handler = 'stamp_v2' AND pid = %d`, next.PID())), "stamp_v2 ran outside the new worker")
	require.Equal(t, shop, count(`source = 'shop' AND handler = 'stamp_v2'`))
	require.Positive(t, byOld)
	require.Positive(t, byNew)
	var overlap bool
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT (SELECT max(at) FROM stamps WHERE handler = 'stamp_v1') >= (SELECT min(at) FROM stamps WHERE handler = 'stamp_v2')`).Scan(&overlap))
	require.False(t, overlap, "the old routes settled an event after the new ones started")
}

// rolloutConfig writes the config of a stampworker with sources bank (and
// shop when withShop) on queue default, and the given routes.
func rolloutConfig(t *testing.T, dbURL string, withShop bool, routes ...string) string {
	t.Helper()
	shop := ""
	if withShop {
		shop = `  - {name: shop, provider: standardwebhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}` + "\n"
	}
	routeLines := ""
	for _, r := range routes {
		routeLines += "    - " + r + "\n"
	}
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `
database: {url: %q, max_conns: 10}
log: {level: info, format: json}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
%sworker:
  listen: "127.0.0.1:0"
  concurrency: %d
  group_max_events: 1
  fetch_poll_interval: 50ms
  soft_stop_timeout: 60s
  routes:
%s`, dbURL, shop, rolloutConcurrency, routeLines), 0o600))
	return path
}

func rolloutCommand(bin, config string) *exec.Cmd {
	cmd := exec.Command(bin, "--config", config)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=", "HOOKINBOX_DATABASE_URL=")
	return cmd
}

// workerAddr is the address the worker logged it listens on.
func workerAddr(t *testing.T, p *proctest.Process) string {
	t.Helper()
	m := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(p.WaitLine(t, "worker listening"))
	require.NotNil(t, m)
	return m[1]
}

// readyz returns the status of the worker's GET /readyz, 0 when it did not
// answer.
func readyz(addr string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// load ingests bank's events, as a receiver does, at a steady pace until
// stopped.
type load struct {
	sent atomic.Int64
	quit chan struct{}
	wg   sync.WaitGroup
	err  error
}

func startLoad(t *testing.T, db *dbtest.DB) *load {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 10})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
	l := &load{quit: make(chan struct{})}
	l.wg.Go(func() {
		// A pace, not a synchronisation: about 200 events a second.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.quit:
				return
			case <-tick.C:
			}
			deliveries := make([]*inboxstore.Delivery, 2)
			for i := range deliveries {
				id := fmt.Sprintf("bank_%06d", l.sent.Add(1))
				deliveries[i] = &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
					Events: []inboxstore.IncomingEvent{{ID: id, Type: "account.deposit", Payload: []byte(`{}`)}}}
			}
			if _, err := ingester.IngestGroup(context.Background(), deliveries); err != nil {
				l.err = err
				return
			}
		}
	})
	t.Cleanup(func() { l.stopOnce() })
	return l
}

func (l *load) stopOnce() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	l.wg.Wait()
}

// stop stops the load and returns how many events it sent.
func (l *load) stop(t *testing.T) int {
	t.Helper()
	l.stopOnce()
	require.NoError(t, l.err)
	return int(l.sent.Load())
}

// ingestShop ingests n events of the new source shop and returns n.
func ingestShop(t *testing.T, db *dbtest.DB, n int) int {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 10})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
	for i := range n {
		res, err := ingester.Ingest(context.Background(), &inboxstore.Delivery{Source: "shop", Provider: "standardwebhooks", Body: []byte(`{}`),
			Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("shop_%03d", i), Type: "order.created", Payload: []byte(`{}`)}}})
		require.NoError(t, err)
		require.Equal(t, 1, res.New)
	}
	return n
}
