package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// gateLock is internal/testkit/slowworker's gate: the advisory lock its gate
// handler takes shared.
const gateLock = 14

// The sources of scenario 14: bank signs as a Standard Webhooks provider,
// one event a delivery; batch is a Marqeta source, whose delivery is a
// batch of notifications, an event each.
var (
	bankSource  = fmt.Sprintf(`{name: bank, provider: standardwebhooks, secrets: [%q]}`, secret)
	batchSource = fmt.Sprintf(`{name: batch, provider: marqeta, basic_auth: [{username: hookinbox, password: %q}]}`, marqetaPassword)
)

// promises is the config of a scenario 14 daemon: the product's defaults
// (worker concurrency 1,000, group_max_events 50, database max_conns 16),
// which it never sets, with its sources, routes and worker keys.
type promises struct {
	DB      string
	Sources []string // entries of sources:
	Routes  []string // entries of worker.routes:
	Worker  []string // more worker keys ("job_timeout: 2s")
}

// write writes the config and returns its path.
func (p promises) write(t *testing.T) string {
	t.Helper()
	list := func(indent string, items []string) string {
		var b strings.Builder
		for _, item := range items {
			b.WriteString(indent + item + "\n")
		}
		return b.String()
	}
	path := filepath.Join(t.TempDir(), "promises.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `
database: {url: %q}
log: {level: info}
receiver: {listen: "127.0.0.1:0"}
sources:
%sworker:
  listen: "127.0.0.1:0"
%s  routes:
%s`, p.DB, list("  - ", p.Sources), list("  ", p.Worker), list("    - ", p.Routes)), 0o600))
	return path
}

// promiseBundle is what each part of scenario 14 runs on: a database of its
// own with the slow_runs table, and the binaries.
type promiseBundle struct {
	db                             *dbtest.DB
	receiver, inboxctl, slowworker string
}

func newPromiseBundle(t *testing.T) *promiseBundle {
	t.Helper()
	bins := proctest.Build(t, binaries...)
	b := &promiseBundle{db: dbtest.New(t), receiver: bins[0], inboxctl: bins[2], slowworker: bins[3]}
	_, err := b.db.Pool.Exec(context.Background(), `
CREATE TABLE slow_runs (event_id text NOT NULL, worker text NOT NULL, key text, v int,
                        began timestamptz NOT NULL, ended timestamptz NOT NULL)`)
	require.NoError(t, err)
	return b
}

// startReceiver starts a receiver and returns it with its base URL.
func (b *promiseBundle) startReceiver(t *testing.T, config string) (*proctest.Process, string) {
	t.Helper()
	p := proctest.Start(t, command(b.receiver, "--config", config))
	addr := listenAddr(t, p, "receiver")
	p.WaitLine(t, "receiver accepting webhooks")
	return p, "http://" + addr
}

// startWorker starts a slow worker that records its runs as name's, and
// waits until it started (working, or waiting for another route set).
func (b *promiseBundle) startWorker(t *testing.T, name, config string) *proctest.Process {
	t.Helper()
	cmd := command(b.slowworker, "--config", config)
	cmd.Env = append(cmd.Env, "SLOWWORKER_NAME="+name)
	p := proctest.Start(t, cmd)
	p.WaitLine(t, "worker started")
	return p
}

// ctl runs inboxctl with config and requires it to succeed.
func (b *promiseBundle) ctl(t *testing.T, config string, args ...string) string {
	t.Helper()
	code, out := proctest.Run(t, command(b.inboxctl, append(args, "--config", config)...))
	require.Zero(t, code, out)
	return out
}

// count runs a count(*) query.
func (b *promiseBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// openJobs counts the event jobs not finalized: fetched, to run, or
// snoozed.
func (b *promiseBundle) openJobs(t *testing.T) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM river_job WHERE kind = $1 AND state NOT IN ('completed', 'cancelled', 'discarded')`,
		inboxstore.JobKind)
}

// tally sets row's counts for the acknowledged events ids: offered and
// acknowledged once each, those missing from the inbox, and the runs that
// committed beyond one per event.
func (b *promiseBundle) tally(t *testing.T, row *faults.Row, ids []string) {
	t.Helper()
	row.Offered, row.Acked = len(ids), len(ids)
	row.Lost = b.count(t, `SELECT count(*) FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox WHERE event_id = a.id)`, ids)
	row.Twice = b.count(t, `SELECT count(*) - count(DISTINCT event_id) FROM slow_runs`)
}

// requireOnce requires what tally counted: no acknowledged event lost, none
// run twice.
func requireOnce(t *testing.T, row *faults.Row) {
	t.Helper()
	require.Zero(t, row.Lost, "acknowledged events missing from the inbox")
	require.Zero(t, row.Twice, "events run more than once")
}

// handover is what the runs of two route sets on one queue show: how many
// events the old routes settled after the new routes' first began, and for
// how long both ran handlers.
func (b *promiseBundle) handover(t *testing.T) (oldAfter int, overlap time.Duration) {
	t.Helper()
	var seconds float64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
WITH first_new AS (SELECT min(began) AS at FROM slow_runs WHERE worker = 'new')
SELECT (SELECT count(*) FROM slow_runs, first_new WHERE worker = 'old' AND ended > first_new.at),
       greatest(0, extract(epoch FROM (SELECT max(ended) FROM slow_runs WHERE worker = 'old') - first_new.at))::float8
FROM first_new`).Scan(&oldAfter, &seconds))
	return oldAfter, time.Duration(seconds * float64(time.Second))
}

// deliverClient bounds one attempt of deliverUntil2xx.
var deliverClient = &http.Client{Timeout: 10 * time.Second}

// deliverUntil2xx sends the delivery newReq builds until it is answered
// 2xx, as a provider retries after an error or no answer; it returns an
// error when ctx ends first.
func deliverUntil2xx(ctx context.Context, newReq func() (*http.Request, error)) error {
	for {
		req, err := newReq()
		if err != nil {
			return err
		}
		var last string
		resp, err := deliverClient.Do(req)
		if err != nil {
			last = err.Error()
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			last = resp.Status
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delivery not acknowledged (last answer: %s): %w", last, ctx.Err())
		case <-time.After(50 * time.Millisecond): // a provider's retry pace
		}
	}
}

// signed builds bank's delivery of one event, signed now.
func signed(ctx context.Context, base, id string, body []byte) func() (*http.Request, error) {
	return func() (*http.Request, error) {
		return webhook.NewRequest(ctx, base+"/webhooks/bank", &webhook.Params{Provider: "standardwebhooks", Secret: secret,
			EventID: id, EventType: faults.DepositType, Time: time.Now(), Body: body})
	}
}

// postBatch delivers one Marqeta batch to the batch source: per category,
// in order, notifications whose tokens are the category's tokens. It
// returns the events' ids ("<category>:<token>").
func postBatch(t *testing.T, base string, categories []string, tokens [][]string) []string {
	t.Helper()
	var body strings.Builder
	var ids []string
	body.WriteString("{")
	for i, category := range categories {
		items := make([]string, len(tokens[i]))
		for j, token := range tokens[i] {
			items[j] = fmt.Sprintf(`{"token":%q}`, token)
			ids = append(ids, category+":"+token)
		}
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, "%q:[%s]", category, strings.Join(items, ","))
	}
	body.WriteString("}")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	config := &provider.Config{BasicAuth: []provider.BasicAuth{{Username: "hookinbox", Password: marqetaPassword}}}
	require.NoError(t, deliverUntil2xx(ctx, func() (*http.Request, error) {
		return webhook.NewRequest(ctx, base+"/webhooks/batch", &webhook.Params{Provider: "marqeta", Body: []byte(body.String()), Config: config})
	}))
	return ids
}

// tokens returns n tokens named prefix_00 ….
func tokens(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s_%03d", prefix, i)
	}
	return out
}

// TestWorkerPromisesUnderLoad is scenario 14 (issue 38): the worker's
// promises, kept under the product's defaults (worker concurrency 1,000,
// groups of 50, a pool of 16) and under load, with the real receiver and a
// real worker binary (internal/testkit/slowworker: cmd/worker with handlers
// that sleep, hang or wait on a gate, and record each event they settle, in
// its transaction, with the database's clock). Each part is a row, measured
// the way issue 38 measured it.
func TestWorkerPromisesUnderLoad(t *testing.T) {
	t.Parallel()

	// a. One slow event costs its group nothing.
	t.Run("SlowEventCostsItsGroupNothing", func(t *testing.T) {
		t.Parallel()
		row := record(t, "14 worker promises under load: a slow event in a group")
		b := newPromiseBundle(t)
		config := promises{DB: b.db.URL, Sources: []string{batchSource}, Worker: []string{"job_timeout: 2s"},
			Routes: []string{`{source: batch, types: [hang], handlers: [hang]}`, `{source: batch, handlers: [record]}`}}.write(t)
		_, base := b.startReceiver(t, config)
		worker := b.startWorker(t, "w", config)
		// 40 events in one delivery; event 20 (the 21st) hangs until its
		// context ends.
		ids := postBatch(t, base, []string{"transactions", "hang", "cardtransitions"},
			[][]string{tokens("tx", 20), {"slow"}, tokens("ct", 19)})
		const slow = "hang:slow"
		type state struct {
			status, lastError   string
			attempts, jobErrors int
		}
		read := func() map[string]state {
			rows, err := b.db.Pool.Query(context.Background(), `
SELECT i.event_id, i.status, i.attempts, coalesce(i.last_error, ''),
       coalesce((SELECT sum(coalesce(array_length(j.errors, 1), 0)) FROM river_job AS j
                 WHERE j.kind = $1 AND (j.args->>'inbox_id')::bigint = i.id), 0)
FROM webhook_inbox AS i WHERE i.source = 'batch'`, inboxstore.JobKind)
			require.NoError(t, err)
			defer rows.Close()
			out := map[string]state{}
			for rows.Next() {
				var id string
				var s state
				require.NoError(t, rows.Scan(&id, &s.status, &s.attempts, &s.lastError, &s.jobErrors))
				out[id] = s
			}
			require.NoError(t, rows.Err())
			return out
		}
		charged := func(s state) bool { return s.jobErrors > 0 || s.lastError != "" }
		var states map[string]state
		// Until the slow event is charged its timeout and every other one is
		// either done or charged.
		worker.WaitUntil(t, time.Minute, func() bool {
			states = read()
			if s := states[slow]; s.attempts == 0 || s.lastError == "" {
				return false
			}
			for _, id := range ids {
				if s, ok := states[id]; id != slow && (!ok || s.status != "done" && !charged(s)) {
					return false
				}
			}
			return true
		})
		firstAttempt, chargedInnocent := 0, 0
		for _, id := range ids {
			s := states[id]
			switch {
			case id == slow:
			case charged(s) || s.attempts > 1:
				chargedInnocent++
			case s.status == "done":
				firstAttempt++
			}
		}
		b.tally(t, row, ids)
		row.Note = fmt.Sprintf("40 events in one delivery, event 20 hangs, job_timeout 2s: %d of 39 innocent events done at their first attempt, "+
			"%d charged a failed attempt; the slow one charged (%s)", firstAttempt, chargedInnocent, states[slow].lastError)
		require.Equal(t, 39, firstAttempt, "innocent events done at their first attempt")
		require.Zero(t, chargedInnocent, "innocent events charged a failed attempt")
		require.Zero(t, b.count(t, `SELECT count(*) FROM slow_runs WHERE event_id = $1`, slow), "the slow event committed")
		requireOnce(t, row)
	})

	// b. One route set works a queue at a time, under load: a route change
	// rolled out as the chart does it, a new worker started beside the old
	// one, each event in a transaction of its own (a lock route) with a 1 s
	// handler, about a thousand in flight.
	t.Run("RouteChangeUnderLoad", func(t *testing.T) {
		t.Parallel()
		if !full {
			t.Skip("full size only (make faults): the old worker's drain takes its soft_stop_timeout")
		}
		row := record(t, "14 worker promises under load: route change")
		b := newPromiseBundle(t)
		ctx := context.Background()
		route := `{source: bank, handlers: [%s], lock: {key: data.account_id}}`
		oldConfig := promises{DB: b.db.URL, Sources: []string{bankSource}, Routes: []string{fmt.Sprintf(route, "sleep")}}.write(t)
		newConfig := promises{DB: b.db.URL, Sources: []string{bankSource}, Routes: []string{fmt.Sprintf(route, "sleep, noop")}}.write(t)
		_, base := b.startReceiver(t, oldConfig)
		target := base + "/webhooks/bank"
		old := b.startWorker(t, "old", oldConfig)

		const backlog, inFlight, sustained, newRuns = 1200, 900, 200, 200
		ds := faults.Deposits("roll", backlog+5000, backlog+5000) // an account each: no lock waits on another
		rep := (&faults.Sender{Targets: []string{target}, Secret: secret, Workers: 16}).Run(ctx, ds[:backlog])
		require.Len(t, rep.Acks, backlog, "deliveries acknowledged (failed attempts: %v)", rep.Answers)
		acks := rep.Acks
		// A steady load meanwhile, above what the old routes settle.
		trickleCtx, stopTrickle := context.WithCancel(ctx)
		defer stopTrickle()
		trickle := make(chan *faults.Report, 1)
		go func() {
			trickle <- (&faults.Sender{Targets: []string{target}, Secret: secret, Workers: 1, Every: 50 * time.Millisecond}).Run(trickleCtx, ds[backlog:])
		}()
		// A thousand jobs in flight, and every connection the pool has for
		// event transactions held by a handler; then sustained for as many
		// more events, so that whatever else the old worker asks of the
		// database now queues behind that load.
		var running, sleeping int
		saturated := func() bool {
			running = b.count(t, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'running'`, inboxstore.JobKind)
			sleeping = b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`)
			return running >= inFlight && sleeping >= 12
		}
		old.WaitUntil(t, 2*time.Minute, saturated)
		settled := b.count(t, `SELECT count(*) FROM slow_runs`)
		old.WaitUntil(t, 2*time.Minute, func() bool {
			return b.count(t, `SELECT count(*) FROM slow_runs`) >= settled+sustained && saturated()
		})

		started := time.Now()
		next := b.startWorker(t, "new", newConfig)
		next.WaitUntil(t, 3*time.Minute, func() bool {
			return b.count(t, `SELECT count(*) FROM slow_runs WHERE worker = 'new'`) >= newRuns
		})
		tookOver := time.Since(started)
		stopTrickle()
		acks = append(acks, (<-trickle).Acks...)
		retired := strings.Contains(old.Log(), "idle: a newer route set took over")
		old.Terminate(t)
		pauseWatch := strings.Count(old.Log(), "could not read the paused sources")

		oldAfter, overlap := b.handover(t)
		ids := make([]string, len(acks))
		for i, a := range acks {
			ids[i] = a.ID
		}
		b.tally(t, row, ids)
		row.Note = fmt.Sprintf("lock route, 1 s handlers, %d jobs in flight, %d handlers holding connections: "+
			"%d events settled by the old routes after the new routes' first, both worked at once for %.1fs; "+
			"the new routes' %dth event %.1fs after their worker started; old worker retired: %v, its pause watch failed %d times",
			running, sleeping, oldAfter, overlap.Seconds(), newRuns, tookOver.Seconds(), retired, pauseWatch)
		require.Zero(t, oldAfter, "events settled by the old routes after the new routes' first")
		require.Zero(t, overlap, "time both route sets worked")
		requireOnce(t, row)
	})

	// c. A pause holds the fetched backlog: ~950 jobs fetched and queued for
	// a group behind the one group transaction the worker starts with, held
	// by a gate.
	t.Run("PauseHoldsTheFetchedBacklog", func(t *testing.T) {
		t.Parallel()
		row := record(t, "14 worker promises under load: pause with a fetched backlog")
		b := newPromiseBundle(t)
		ctx := context.Background()
		// job_timeout 5m gives the gate a slice of 30 s in its group, which
		// outlasts the steps below.
		config := promises{DB: b.db.URL, Sources: []string{batchSource}, Worker: []string{"job_timeout: 5m"},
			Routes: []string{`{source: batch, types: [gate], handlers: [gate]}`, `{source: batch, handlers: [record]}`}}.write(t)
		_, base := b.startReceiver(t, config)
		worker := b.startWorker(t, "w", config)
		hold, err := b.db.Pool.Acquire(ctx)
		require.NoError(t, err)
		defer hold.Release()
		_, err = hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, gateLock)
		require.NoError(t, err)
		released := false
		release := func() {
			if !released {
				_, err := hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, gateLock)
				require.NoError(t, err)
				released = true
			}
		}
		defer release()

		// The gate holds the worker's one group transaction (a fresh
		// worker's limit is 1); the backlog is fetched and waits for it.
		ids := postBatch(t, base, []string{"gate"}, [][]string{{"g"}})
		worker.WaitUntil(t, time.Minute, func() bool {
			return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
  AND query LIKE '%pg_advisory_xact_lock_shared%'`) == 1
		})
		n := size(100, 950)
		ids = append(ids, postBatch(t, base, []string{"transactions"}, [][]string{tokens("tx", n)})...)
		worker.WaitUntil(t, time.Minute, func() bool {
			return b.count(t, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'running'`, inboxstore.JobKind) == n+1
		})
		require.Zero(t, b.count(t, `SELECT count(*) FROM slow_runs`), "an event began before the pause")

		b.ctl(t, config, "sources", "pause", "batch")
		worker.WaitLine(t, "source paused", `"source":"batch"`)
		// Whatever begins from now on began more than pause_refresh after
		// the pause.
		worker.WaitUntil(t, time.Minute, func() bool {
			return b.count(t, `SELECT count(*) FROM hookinbox_source_pause WHERE source = 'batch' AND paused_at + interval '1 second' < now()`) == 1
		})
		release()
		worker.WaitUntil(t, time.Minute, func() bool { return b.openJobs(t) == 0 })
		late := b.count(t, `SELECT count(*) FROM slow_runs, hookinbox_source_pause AS p
WHERE p.source = 'batch' AND event_id LIKE 'transactions:%' AND began > p.paused_at + interval '1 second'`)
		held := b.count(t, `SELECT count(*) FROM webhook_inbox WHERE source = 'batch' AND status = 'pending' AND held_at IS NOT NULL`)
		b.tally(t, row, ids)
		row.Note = fmt.Sprintf("%d jobs fetched and queued behind a held group, paused with inboxctl: %d began more than pause_refresh (1s) after the pause, "+
			"%d of %d held", n, late, held, n)
		require.Zero(t, late, "events of the paused source begun more than pause_refresh after the pause")
		require.Equal(t, n, held, "events held")

		resumed := fmt.Sprintf("%d held events enqueued", n)
		require.Contains(t, b.ctl(t, config, "sources", "resume", "batch"), resumed)
		worker.WaitUntil(t, 2*time.Minute, func() bool {
			return b.count(t, `SELECT count(*) FROM webhook_inbox WHERE source = 'batch' AND status = 'done'`) == n+1
		})
		runs := b.count(t, `SELECT count(*) FROM slow_runs WHERE event_id LIKE 'transactions:%'`)
		b.tally(t, row, ids)
		row.Note += fmt.Sprintf("; resumed (%s): each run once (%d runs)", resumed, runs)
		require.Equal(t, n, runs, "backlog events run after the resume")
		requireOnce(t, row)
	})

	// d. Turning sequencing on rolls out: the new worker waits for the old
	// routes to hand over, and no event is stranded parked.
	t.Run("SequencingRollsOut", func(t *testing.T) {
		t.Parallel()
		if !full {
			t.Skip("full size only (make faults)")
		}
		row := record(t, "14 worker promises under load: sequencing turned on")
		b := newPromiseBundle(t)
		oldConfig := promises{DB: b.db.URL, Sources: []string{bankSource}, Routes: []string{`{source: bank, handlers: [record]}`}}.write(t)
		newConfig := promises{DB: b.db.URL, Sources: []string{bankSource},
			Routes: []string{`{source: bank, handlers: [record], sequence: {key: data.key, order: data.v}}`}}.write(t)
		_, base := b.startReceiver(t, oldConfig)
		old := b.startWorker(t, "old", oldConfig)

		// 20 keys, each key's versions sent one after another, in order.
		const keys, oldRuns, newRuns = 20, 100, 100
		loadCtx, stopLoad := context.WithCancel(context.Background())
		defer stopLoad()
		var (
			mu   sync.Mutex
			ids  []string
			errs = make(chan error, keys)
			wg   sync.WaitGroup
		)
		for k := range keys {
			wg.Go(func() {
				for v := 1; loadCtx.Err() == nil; v++ {
					id := fmt.Sprintf("k%02d_%04d", k, v)
					body := fmt.Appendf(nil, `{"type":%q,"data":{"key":"k%02d","v":%d}}`, faults.DepositType, k, v)
					if err := deliverUntil2xx(loadCtx, signed(loadCtx, base, id, body)); err != nil {
						if loadCtx.Err() == nil {
							errs <- err
						}
						return
					}
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
					select {
					case <-loadCtx.Done():
					case <-time.After(200 * time.Millisecond): // each key's pace: about 100 events/s in all
					}
				}
			})
		}
		old.WaitUntil(t, time.Minute, func() bool { return b.count(t, `SELECT count(*) FROM slow_runs`) >= oldRuns })
		next := b.startWorker(t, "new", newConfig)
		next.WaitUntil(t, 2*time.Minute, func() bool {
			return b.count(t, `SELECT count(*) FROM slow_runs WHERE worker = 'new'`) >= newRuns
		})
		stopLoad()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		retired := strings.Contains(old.Log(), "idle: a newer route set took over")
		old.Terminate(t)
		// Every job has ended: a row still pending now is parked with no one
		// to wake it but the reaper's orphan pass (orphan_after, 5 min).
		var rollout time.Time
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT min(began) FROM slow_runs WHERE worker = 'new'`).Scan(&rollout))
		next.WaitUntil(t, 2*time.Minute, func() bool { return b.openJobs(t) == 0 })
		var quiet time.Duration
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT now() - $1::timestamptz`, rollout).Scan(&quiet))
		stranded := b.count(t, `SELECT count(*) FROM webhook_inbox WHERE source = 'bank' AND status = 'pending'`)

		oldAfter, _ := b.handover(t)
		// A run of a key after a run of a higher version of it, both after
		// the new routes' first.
		disorder := b.count(t, `
WITH first_new AS (SELECT min(began) AS at FROM slow_runs WHERE worker = 'new'),
     r AS (SELECT s.* FROM slow_runs AS s, first_new WHERE s.ended > first_new.at)
SELECT count(*) FROM r WHERE EXISTS (SELECT 1 FROM r AS e WHERE e.key = r.key AND e.v > r.v AND e.ended < r.ended)`)
		b.tally(t, row, ids)
		row.Note = fmt.Sprintf("sequence: added to a grouped route, %d keys at about 100 events/s: %d events run by the old routes after the new routes' first, "+
			"%d out of order per key, %d parked events still pending once every job ended (%.0fs after the rollout); old worker retired: %v",
			keys, oldAfter, disorder, stranded, quiet.Seconds(), retired)
		require.Zero(t, oldAfter, "events run by the old routes after the new routes' first")
		require.Zero(t, disorder, "events run out of order per key")
		require.Zero(t, stranded, "parked events left pending")
		requireOnce(t, row)
	})

	// e. Every handler log line carries its delivery's X-Request-Id, on the
	// group path too.
	t.Run("HandlersSeeTheRequestID", func(t *testing.T) {
		t.Parallel()
		row := record(t, "14 worker promises under load: request id in handler logs")
		b := newPromiseBundle(t)
		config := promises{DB: b.db.URL, Sources: []string{bankSource}, Routes: []string{`{source: bank, handlers: [log]}`}}.write(t)
		_, base := b.startReceiver(t, config)
		worker := b.startWorker(t, "w", config)
		n := size(100, 400)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ids := make([]string, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		next := make(chan int, n)
		for i := range n {
			ids[i] = fmt.Sprintf("rid_%04d", i)
			next <- i
		}
		close(next)
		for range 16 {
			wg.Go(func() {
				for i := range next {
					build := signed(ctx, base, ids[i], fmt.Appendf(nil, `{"type":%q,"data":{"i":%d}}`, faults.DepositType, i))
					errs <- deliverUntil2xx(ctx, func() (*http.Request, error) {
						req, err := build()
						if err == nil {
							req.Header.Set("X-Request-Id", "req-"+ids[i])
						}
						return req, err
					})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		type line struct {
			Msg       string `json:"msg"`
			EventID   string `json:"event_id"`
			RequestID string `json:"request_id"`
		}
		var lines []line
		worker.WaitUntil(t, time.Minute, func() bool {
			lines = lines[:0]
			seen := map[string]bool{}
			for _, text := range strings.Split(worker.Log(), "\n") {
				var l line
				if json.Unmarshal([]byte(text), &l) == nil && l.Msg == "event" && l.EventID != "" {
					lines = append(lines, l)
					seen[l.EventID] = true
				}
			}
			return len(seen) == n
		})
		empty, other := 0, 0
		for _, l := range lines {
			switch l.RequestID {
			case "":
				empty++
			case "req-" + l.EventID:
			default:
				other++
			}
		}
		b.tally(t, row, ids)
		row.Note = fmt.Sprintf("%d deliveries with an X-Request-Id each, a log route under the defaults: %d of %d handler lines with an empty request_id, %d with another's",
			n, empty, len(lines), other)
		require.Zero(t, empty, "handler lines with an empty request_id")
		require.Zero(t, other, "handler lines with another delivery's request_id")
		requireOnce(t, row)
	})
}
