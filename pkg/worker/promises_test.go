package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// The worker's promises under the product's defaults (a thousand jobs in
// flight, groups of fifty, a pool of sixteen) and under load: each test
// here failed on the code before issue 38.

// defaultsPool is a pool on the bundle's database the size of the
// product's default (database.max_conns: 16).
func (b *testBundle) defaultsPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// startDefaults starts a worker on pool with the product's defaults but for
// the test's routes and registry, and mutate last.
func (b *testBundle) startDefaults(t *testing.T, pool *pgxpool.Pool, mutate func(*worker.Config)) *worker.Worker {
	t.Helper()
	return runWorker(t, pool, &worker.Config{Sources: sources, Registry: b.registry(t), Logger: zaptest.NewLogger(t)}, mutate)
}

// charged reads, per event id of the bundle's rows, the attempts charged
// to it: the row's count, and the errors its jobs recorded.
func (b *testBundle) charged(t *testing.T, eventID string) (attempts, jobErrors int) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
SELECT i.attempts, coalesce((SELECT sum(coalesce(array_length(j.errors, 1), 0)) FROM river_job AS j
                             WHERE j.kind = 'hookinbox.event' AND (j.args->>'inbox_id')::bigint = i.id), 0)
FROM webhook_inbox AS i WHERE i.event_id = $1`, eventID).Scan(&attempts, &jobErrors))
	return attempts, jobErrors
}

func TestSlowEventCostsItsGroupNothing(t *testing.T) {
	t.Parallel()

	// 40 events in one delivery share a group; event 20's handlers hang
	// until their context ends. The 39 others commit at their first
	// attempt and are charged nothing; the slow one meets its own
	// job_timeout, and is charged for it.
	for name, slow := range map[string]worker.Handler{
		"HandlerWaitingOnItsContext": func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
			<-ctx.Done()
			return ctx.Err()
		},
		"StatementThatHangs": func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
			_, err := tx.Exec(ctx, `SELECT pg_sleep(60)`)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			const n, slowAt = 40, 20
			b.startDefaults(t, b.defaultsPool(t), func(c *worker.Config) {
				c.JobTimeout = 2 * time.Second
				c.MaxAttempts = 3
				c.Registry.Register("slow", slow)
				c.Routes = []worker.Route{
					{Source: "bank", Types: []string{"slow"}, Handlers: []string{"effect", "slow"}},
					{Source: "bank", Handlers: []string{"effect"}},
				}
			})
			d := &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`)}
			for i := range n {
				typ := "account.deposit"
				if i == slowAt {
					typ = "slow"
				}
				d.Events = append(d.Events, inboxstore.IncomingEvent{ID: fmt.Sprintf("evt_%02d", i), Type: typ, Payload: []byte(`{}`)})
			}
			res, err := b.ingester.Ingest(context.Background(), d)
			require.NoError(t, err)
			require.Equal(t, n, res.New)

			for i, row := range res.Claimed {
				if i == slowAt {
					continue
				}
				b.waitStatus(t, row.ID, inbox.StatusDone)
				attempts, jobErrors := b.charged(t, row.EventID)
				require.Equal(t, 1, attempts, "%s: done at its first attempt", row.EventID)
				require.Zero(t, jobErrors, "%s: no failed attempt charged", row.EventID)
				require.Equal(t, 1, b.effects(t, row.EventID))
			}
			// The slow event alone meets its timeout: charged for it.
			poll(t, 60*time.Second, "the slow event to be charged its timeout", func() (bool, error) {
				r := b.row(t, res.Claimed[slowAt].ID)
				return r.Attempts >= 1 && r.LastError != "", nil
			})
			require.Zero(t, b.effects(t, res.Claimed[slowAt].EventID))
		})
	}
}

func TestAnEventHandedOverByItsGroupGetsAllItsTime(t *testing.T) {
	t.Parallel()

	// The 30-minute soak (issue 40, seed 101): events whose handlers need
	// more than their slice of a group's time are handed over to be worked
	// alone with what the group left of the job's time. Those that needed
	// more than that ran out of it, were charged an attempt for the time
	// their group spent, and (fetched with others again at each retry)
	// again at every attempt: River's backoff grew past the soak's tail,
	// and max_attempts would fail them. Now a run that ran out of time with
	// its handlers begun on less than about all of it is put back
	// uncharged, and runs again alone with all of it.
	//
	// The long events here need 90% of the job's time, more than a group
	// can leave them: it cuts an event at its slice, a tenth of the time,
	// after the event began. Each delivery is one group's worth; every
	// event must be done at its first charged attempt.
	b := setup(t)
	const (
		n, every   = 24, 8
		jobTimeout = 4 * time.Second
	)
	b.startDefaults(t, b.defaultsPool(t), func(c *worker.Config) {
		c.JobTimeout = jobTimeout
		c.MaxAttempts = 3
		c.Registry.Register("long", func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
			select {
			case <-time.After(jobTimeout * 9 / 10): // its work
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		c.Routes = []worker.Route{
			{Source: "bank", Types: []string{"long"}, Handlers: []string{"effect", "long"}},
			{Source: "bank", Handlers: []string{"effect"}},
		}
	})
	d := &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`)}
	for i := range n {
		typ := "account.deposit"
		if i%every == 0 {
			typ = "long"
		}
		d.Events = append(d.Events, inboxstore.IncomingEvent{ID: fmt.Sprintf("evt_%02d", i), Type: typ, Payload: []byte(`{}`)})
	}
	res, err := b.ingester.Ingest(context.Background(), d)
	require.NoError(t, err)
	require.Equal(t, n, res.New)
	for _, row := range res.Claimed {
		b.waitStatus(t, row.ID, inbox.StatusDone)
		attempts, jobErrors := b.charged(t, row.EventID)
		require.Equal(t, 1, attempts, "%s: done at its first attempt", row.EventID)
		require.Zero(t, jobErrors, "%s: no failed attempt charged", row.EventID)
		require.Equal(t, 1, b.effects(t, row.EventID))
	}
}

// gate is a handler that blocks each run until release is closed, after
// reporting it on entered.
type gate struct {
	entered chan string
	release chan struct{}
}

func newGate(capacity int) *gate {
	return &gate{entered: make(chan string, capacity), release: make(chan struct{})}
}

func (g *gate) handler(ctx context.Context, _ pgx.Tx, ev inbox.Event) error {
	select {
	case g.entered <- ev.EventID:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestPauseHoldsWhatHasNotBegun(t *testing.T) {
	t.Parallel()

	// The jobs of a backlog River fetched before the pause wait for a
	// transaction (in a group's queue, or for a connection); once the
	// worker sees the pause, none of them begins its handlers: each is
	// held, and Resume runs each once.
	for name, groups := range map[string]bool{"Grouped": true, "Alone": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			g := newGate(16)
			pool := b.defaultsPool(t)
			gates := 1 // the only group transaction the limit allows at first
			if !groups {
				gates = int(pool.Config().MaxConns) - 4 // every connection an event transaction may have
			}
			w := b.startDefaults(t, pool, func(c *worker.Config) {
				if !groups {
					c.GroupMaxEvents = 1
				}
				c.Registry.Register("gate", g.handler)
				c.Routes = []worker.Route{
					{Source: "bank", Types: []string{"gate"}, Handlers: []string{"gate"}},
					{Source: "bank", Handlers: []string{"effect"}},
				}
			})
			for i := range gates {
				b.ingest(t, fmt.Sprintf("gate_%02d", i), "gate")
				await(t, g.entered, "the held handler to begin")
			}
			const n = 200
			ids := make([]int64, n)
			for i := range n {
				ids[i] = b.ingest(t, fmt.Sprintf("evt_%03d", i), "account.deposit")
			}
			// Every job is fetched and in Work, waiting behind the gates.
			poll(t, 60*time.Second, "the backlog to be fetched", func() (bool, error) {
				if groups {
					return w.QueuedForGroup() == n, nil
				}
				var running int
				err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'hookinbox.event' AND state = 'running'`).Scan(&running)
				return running == n+gates, err
			})
			_, err := b.store.Pause(ctx, "bank", "test", "")
			require.NoError(t, err)
			poll(t, 30*time.Second, "the worker to see the pause", func() (bool, error) { return w.SeesPaused("bank"), nil })
			close(g.release)

			poll(t, 60*time.Second, "the backlog's jobs to end", func() (bool, error) {
				var open int
				err := b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM river_job WHERE kind = 'hookinbox.event' AND state NOT IN ('completed', 'discarded', 'cancelled')`).Scan(&open)
				return open == 0, err
			})
			var ran, held int
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&ran))
			require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM webhook_inbox WHERE status = 'pending' AND held_at IS NOT NULL AND event_id LIKE 'evt%'`).Scan(&held))
			require.Zero(t, ran, "no event begun after the worker saw the pause")
			require.Equal(t, n, held)

			_, err = b.store.Resume(ctx, &inboxstore.ResumeParams{Source: "bank", Client: b.client, QueueFor: func(string) string { return river.QueueDefault }})
			require.NoError(t, err)
			for _, id := range ids {
				require.Equal(t, 1, b.waitStatus(t, id, inbox.StatusDone).Attempts)
			}
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&ran))
			require.Equal(t, n, ran)
		})
	}
}

func TestControlPlaneUnderLoad(t *testing.T) {
	t.Parallel()

	// Events worked in transactions of their own (group_max_events: 1, as
	// a lock, a sequence or an isolation level have them) are a thousand in
	// flight, and their handlers hold their transactions: they take no
	// more connections than the pool has for them, and the worker's record
	// is renewed and a pause seen meanwhile, on connections of their own.
	b := setup(t)
	ctx := context.Background()
	g := newGate(1000)
	pool := b.defaultsPool(t)
	var (
		mu             sync.Mutex
		inFlight, most int
	)
	w := b.startDefaults(t, pool, func(c *worker.Config) {
		c.GroupMaxEvents = 1
		c.HeartbeatInterval = time.Second
		c.Registry.Register("hold", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			defer func() {
				mu.Lock()
				inFlight--
				mu.Unlock()
			}()
			return g.handler(ctx, tx, ev)
		})
		c.Routes = []worker.Route{{Source: "bank", Handlers: []string{"hold", "effect"}}}
	})
	const n = 300
	for i := range n {
		b.ingest(t, fmt.Sprintf("evt_%03d", i), "account.deposit")
	}
	slots := int(pool.Config().MaxConns) - 4
	for range slots {
		await(t, g.entered, "the held handler to begin")
	}
	var first time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT max(expires_at) FROM hookinbox_worker_routes`).Scan(&first))
	// Three heartbeats: the record would have expired without renewals.
	poll(t, 60*time.Second, "the record to be renewed three times", func() (bool, error) {
		var last time.Time
		err := b.db.Pool.QueryRow(ctx, `SELECT max(expires_at) FROM hookinbox_worker_routes`).Scan(&last)
		return last.Sub(first) >= 3*time.Second, err
	})
	require.False(t, w.Fenced())
	_, err := b.store.Pause(ctx, "other", "test", "")
	require.NoError(t, err)
	poll(t, 30*time.Second, "the worker to see the pause", func() (bool, error) { return w.SeesPaused("other"), nil })
	mu.Lock()
	require.LessOrEqual(t, most, slots, "no more event transactions than the pool has connections for")
	mu.Unlock()
	close(g.release)
	b.requireEachDoneOnce(t, n)
}

func TestRouteOptionsRollOut(t *testing.T) {
	t.Parallel()

	// Adding a route option that changes how an event is handled is a route
	// change: the new worker waits for the old one to hand over instead of
	// working the queue beside it.
	plain := worker.Route{Source: "bank", Handlers: []string{"effect"}}
	defaultQueue := map[string]int{river.QueueDefault: 1}
	changes := map[string]func(*worker.Route){
		"Sequence":  func(r *worker.Route) { r.Sequence = &worker.SequenceOption{Key: "data.account", Order: "data.version"} },
		"Lock":      func(r *worker.Route) { r.Lock = &worker.LockOption{Key: "data.account"} },
		"Isolation": func(r *worker.Route) { r.Isolation = "serializable" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			old := b.newWorker(t, []worker.Route{plain}, defaultQueue, nil)
			require.NoError(t, old.Start(ctx))
			changed := plain
			change(&changed)
			next := b.newWorker(t, []worker.Route{changed}, defaultQueue, nil)
			require.NoError(t, next.Start(ctx))
			require.NotEqual(t, old.RoutesDescription(river.QueueDefault), next.RoutesDescription(river.QueueDefault))
			require.Equal(t, worker.StateWaiting, next.State(), "the new route set waits for the old one")
		})
	}

	// The same route written with an option's default and without it is
	// the same route: no rollout.
	t.Run("DefaultsWrittenOutAreNoChange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		lock := plain
		lock.Lock = &worker.LockOption{Key: "data.account"}
		explicit := lock
		explicit.Lock = &worker.LockOption{Key: "data.account", Snooze: worker.LockSnoozeDefault}
		explicit.Isolation = "read_committed"
		old := b.newWorker(t, []worker.Route{lock}, defaultQueue, nil)
		require.NoError(t, old.Start(ctx))
		next := b.newWorker(t, []worker.Route{explicit}, defaultQueue, nil)
		require.NoError(t, next.Start(ctx))
		require.Equal(t, worker.StateWorking, next.State())
	})
}

func TestHandlersSeeTheSameEventOnEveryPath(t *testing.T) {
	t.Parallel()

	// The same delivery's event, worked alone (a route with an isolation
	// level of its own) and in a group (behind a gate, with others), reaches
	// its handler alike, field by field, request id included.
	b := setup(t)
	var (
		mu   sync.Mutex
		seen = map[string]inbox.Event{}
	)
	record := func(_ context.Context, _ pgx.Tx, ev inbox.Event) error {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.EventID] = ev
		return nil
	}
	w, entered, release := startGatedWith(t, b, nil, map[string]worker.Handler{"record": record},
		worker.Route{Source: "*", Types: []string{"alone.*"}, Handlers: []string{"record"}, Isolation: "repeatable_read"},
		worker.Route{Source: "*", Types: []string{"grouped.*"}, Handlers: []string{"record"}})
	b.ingest(t, "evt_gate", "gate")
	await(t, entered, "the held handler to begin")
	deliver := func(eventID, typ string) int64 {
		res, err := b.ingester.Ingest(context.Background(), &inboxstore.Delivery{
			Source: "bank", Provider: "standardwebhooks", Body: []byte(`{"a":1}`), RequestID: "req-" + eventID,
			Headers: map[string]string{"Webhook-Id": "msg_1"},
			Events:  []inboxstore.IncomingEvent{{ID: eventID, Type: typ, Payload: []byte(`{"a":1}`)}},
		})
		require.NoError(t, err)
		return res.Claimed[0].ID
	}
	alone := deliver("evt_alone", "alone.x")
	grouped := []int64{deliver("evt_grouped", "grouped.x"), b.ingest(t, "evt_filler_1", "grouped.y"), b.ingest(t, "evt_filler_2", "grouped.y")}
	// The grouped ones wait behind the gate, to be one group.
	require.Eventually(t, func() bool { return w.QueuedForGroup() == len(grouped) }, 30*time.Second, 5*time.Millisecond)
	close(release)
	b.waitStatus(t, alone, inbox.StatusDone)
	for _, id := range grouped {
		b.waitStatus(t, id, inbox.StatusDone)
	}
	mu.Lock()
	defer mu.Unlock()
	a, g := seen["evt_alone"], seen["evt_grouped"]
	require.Equal(t, "req-evt_alone", a.RequestID)
	require.Equal(t, "req-evt_grouped", g.RequestID)
	// What differs by construction: the row, the event, its type, its
	// request id and when it was received.
	for _, ev := range []*inbox.Event{&a, &g} {
		ev.ID, ev.EventID, ev.EventType, ev.RequestID, ev.ReceivedAt = 0, "", "", "", time.Time{}
	}
	aj, err := json.Marshal(a)
	require.NoError(t, err)
	gj, err := json.Marshal(g)
	require.NoError(t, err)
	require.JSONEq(t, string(aj), string(gj))
	require.Equal(t, a, g)
}

func TestAWorkerThatCannotRenewFencesItself(t *testing.T) {
	t.Parallel()

	// Worker A's records cannot be renewed (its role lost its rights on
	// hookinbox_worker_routes; its event work goes on), and worker B, with
	// other routes, takes the queue over once A's records expire. A stops
	// beginning events before they do: no handler of A runs while its
	// records are dead, and every event is worked once, by A or by B. When
	// A reaches the table again, its records are gone and B works the
	// queue: A claims it again, finds B, deletes its records, and drains
	// and retires without ever unfencing itself (the claim that found B
	// extends nothing A may work on). A soak found that bug: a claim that found a blocker
	// unfenced the worker, whose fetched jobs then began beside B's.
	ctx := context.Background()
	b := setup(t)
	_, err := b.db.Pool.Exec(ctx, `
CREATE TABLE fence_log (event_id text NOT NULL, worker text NOT NULL, live bool NOT NULL);
-- Whether the records of the worker whose routes name handler are live,
-- whatever the caller may read.
CREATE FUNCTION fence_live(handler text) RETURNS bool LANGUAGE sql SECURITY DEFINER AS $$
    SELECT EXISTS (SELECT 1 FROM hookinbox_worker_routes
                   WHERE routes LIKE '%-> ' || handler || '%' AND state = 'working' AND expires_at > now())
$$;`)
	require.NoError(t, err)
	poolA, role := b.rolePool(t, 16)

	start := func(pool *pgxpool.Pool, name string) *worker.Worker {
		return b.startDefaults(t, pool, func(c *worker.Config) {
			c.HeartbeatInterval = time.Second
			c.Registry.Register(name, func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				_, err := tx.Exec(ctx, `INSERT INTO fence_log VALUES ($1, $2, fence_live($2))`, ev.EventID, name)
				return err
			})
			c.Routes = []worker.Route{{Source: "bank", Handlers: []string{name}}}
		})
	}
	a := start(poolA, "rec_a")
	_, err = b.db.Pool.Exec(ctx, `REVOKE ALL ON hookinbox_worker_routes FROM `+role)
	require.NoError(t, err)
	// Given back before A's Stop, which deletes its records, should the
	// test end before it does.
	t.Cleanup(func() {
		_, err := b.db.Pool.Exec(context.Background(), `GRANT ALL ON hookinbox_worker_routes TO `+role)
		require.NoError(t, err)
	})
	next := start(b.db.Pool, "rec_b")

	// Traffic until B has worked twenty events.
	n := 0
	poll(t, 60*time.Second, "B to take the queue over and work twenty events", func() (bool, error) {
		b.ingest(t, fmt.Sprintf("evt_%04d", n), "account.deposit")
		n++
		var byB int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM fence_log WHERE worker = 'rec_b'`).Scan(&byB)
		return byB >= 20, err
	})
	require.Equal(t, worker.StateWorking, next.State())
	require.True(t, a.Fenced())
	_, err = b.db.Pool.Exec(ctx, `GRANT ALL ON hookinbox_worker_routes TO `+role)
	require.NoError(t, err)
	poll(t, 60*time.Second, "A to find B working its queue and drain", func() (bool, error) {
		return a.State() != worker.StateWorking, nil
	})
	require.True(t, a.Fenced(), "A unfenced itself as it found B working its queue (state %s)", a.State())
	waitState(t, a, worker.StateRetired)
	require.True(t, a.Fenced(), "A unfenced itself while it drained")
	for range 20 {
		b.ingest(t, fmt.Sprintf("evt_%04d", n), "account.deposit")
		n++
	}
	poll(t, 60*time.Second, "every event to be done", func() (bool, error) {
		c, err := b.store.Count(ctx, nil)
		return err == nil && c.Done == int64(n), err
	})
	var total, distinct, dead, byA int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*), count(DISTINCT event_id), count(*) FILTER (WHERE NOT live), count(*) FILTER (WHERE worker = 'rec_a')
FROM fence_log`).Scan(&total, &distinct, &dead, &byA))
	require.Zero(t, dead, "no event worked by a worker whose records were dead")
	require.Equal(t, n, total, "each event worked once")
	require.Equal(t, n, distinct)
	require.True(t, a.Fenced())
	t.Logf("%d events: %d by A before it fenced itself, %d by B", n, byA, n-byA)
}

func TestASingleSourceUsesEveryFlusher(t *testing.T) {
	t.Parallel()

	// The last idle flusher is kept for another source's events only where
	// another source can come: with one source, while one group
	// transaction waits (a handler holds it), the source's next events
	// commit in the other one, as the limit allows.
	b := setup(t)
	entered, release := make(chan string, 1), make(chan struct{})
	w := b.startDefaults(t, b.defaultsPool(t), func(c *worker.Config) {
		c.GroupFlushers = 2
		c.Registry.Register("gate", func(ctx context.Context, _ pgx.Tx, ev inbox.Event) error {
			select {
			case entered <- ev.EventID:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		c.Routes = []worker.Route{
			{Source: "bank", Types: []string{"gate"}, Handlers: []string{"gate"}},
			{Source: "bank", Handlers: []string{"effect"}},
		}
	})
	// The limit allows two group transactions at once (it grows so with a
	// busy worker's commits; here it is raised, with commits slower than
	// any of the test's, so that none of these can cut it).
	w.RaiseTransactionLimit(2)
	limit, _ := w.TransactionLimit()
	require.Equal(t, 2, limit)
	// A gate holds one transaction; the source's next events commit in
	// the other.
	b.ingest(t, "gate", "gate")
	await(t, entered, "the held handler to begin")
	for i := range 10 {
		b.waitStatus(t, b.ingest(t, fmt.Sprintf("evt_%d", i), "account.deposit"), inbox.StatusDone)
	}
	close(release)
}

// rolePool returns a pool of maxConns connections on the bundle's
// database as a role of its own (returned), with every right on its
// tables, which the tests take back to fail the worker's statements on one
// table alone.
func (b *testBundle) rolePool(t *testing.T, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	server := newPool(t, dbtest.ServerURL(t))
	role := fmt.Sprintf("hookinbox_budget_%d", time.Now().UnixNano())
	_, err := server.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN`, role))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = server.Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
	_, err = b.db.Pool.Exec(ctx, `
GRANT USAGE ON SCHEMA public TO `+role+`;
GRANT ALL ON ALL TABLES IN SCHEMA public TO `+role+`;
GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO `+role+`;`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = b.db.Pool.Exec(context.Background(), `REASSIGN OWNED BY `+role+` TO postgres; DROP OWNED BY `+role)
	})
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, role
}

func TestWorkerStaysWithinMaxConns(t *testing.T) {
	t.Parallel()

	// docs/deploying.md: "Each process opens up to database.max_conns", and
	// the daemon's start-up check lets a worker start whose max_conns is
	// all the server allows. A load that fills the worker's pool (16, the
	// default) leaves it with max_conns connections open, and one more:
	// the connection River's LISTEN takes out of the pool (hijacked: the
	// pool opens another in its place; so it was before issue 38). No
	// more: on a server that allows exactly that, a connection the worker
	// cannot open fails an event whose handlers never ran.
	b := setup(t)
	ctx := context.Background()
	const maxConns = 16
	pool, role := b.rolePool(t, maxConns)
	b.startDefaults(t, pool, func(c *worker.Config) { c.Routes = []worker.Route{{Source: "bank", Handlers: []string{"effect"}}} })
	const n = 600
	for i := range n {
		b.ingest(t, fmt.Sprintf("evt_%04d", i), "account.deposit")
	}
	b.requireEachDoneOnce(t, n)
	// Idle connections stay open (pgxpool's max_conn_idle_time is 30 min).
	var open int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, role).Scan(&open))
	require.LessOrEqual(t, open, maxConns+1, "connections the worker opened, River's LISTEN included")
}

func TestPauseSeenAfterAStartThatFailed(t *testing.T) {
	t.Parallel()

	// Start's doc: when it fails, "Start may be called again". A first
	// Start whose claim of the routes record fails (here the role may not
	// write hookinbox_worker_routes; in production a connection refused)
	// must leave a worker whose second Start works as a first one would:
	// a pause takes effect within pause_refresh.
	b := setup(t)
	ctx := context.Background()
	pool, role := b.rolePool(t, 16)
	_, err := b.db.Pool.Exec(ctx, `REVOKE ALL ON hookinbox_worker_routes FROM `+role)
	require.NoError(t, err)
	cfg := &worker.Config{
		Sources: sources, Registry: b.registry(t), Logger: zaptest.NewLogger(t), PauseRefresh: 100 * time.Millisecond,
		Routes: []worker.Route{{Source: "bank", Handlers: []string{"effect"}}},
	}
	w, err := worker.New(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
	require.Error(t, w.Start(ctx), "the claim fails")
	_, err = b.db.Pool.Exec(ctx, `GRANT ALL ON hookinbox_worker_routes TO `+role)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	require.Equal(t, worker.StateWorking, w.State())

	_, err = b.store.Pause(ctx, "bank", "test", "")
	require.NoError(t, err)
	poll(t, 30*time.Second, "the worker to see the pause", func() (bool, error) { return w.SeesPaused("bank"), nil })
	id := b.ingest(t, "evt_after_pause", "account.deposit")
	poll(t, 30*time.Second, "the event's job to end", func() (bool, error) {
		var open int
		err := b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM river_job WHERE kind = 'hookinbox.event' AND state NOT IN ('completed', 'discarded', 'cancelled')`).Scan(&open)
		return open == 0, err
	})
	require.Zero(t, b.effects(t, "evt_after_pause"), "an event received after the worker saw the pause was handled")
	require.Equal(t, inbox.StatusPending, b.row(t, id).Status)
}

func TestAnEventThatWaitedForATransactionIsNotCharged(t *testing.T) {
	t.Parallel()

	// The soak's seed 788135 (issue 40): slow events hold the worker's
	// event transactions (two, at max_conns 6) until their time is up;
	// quick events fetched a little later wait for one, and get it with
	// little of their own time left. They used to begin anyway and run out
	// of it: charged an attempt for their neighbours' fault. Now handlers
	// begin only with at least half of the job's time left; a run that got
	// its transaction later is put back, uncharged.
	b := setup(t)
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const slow, quick = 2, 30
	entered := make(chan struct{}, 8)
	b.startDefaults(t, pool, func(c *worker.Config) {
		c.JobTimeout = 2 * time.Second
		c.MaxAttempts = 2
		c.Registry.Register("slow", func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
			select {
			case entered <- struct{}{}:
			case <-ctx.Done():
			}
			<-ctx.Done()
			return ctx.Err()
		})
		c.Registry.Register("quick", func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
			_, err := tx.Exec(ctx, `SELECT pg_sleep(0.1)`)
			return err
		})
		c.Routes = []worker.Route{
			{Source: "bank", Types: []string{"slow"}, Handlers: []string{"effect", "slow"}},
			{Source: "bank", Handlers: []string{"effect", "quick"}},
		}
	})
	ingest := func(typ string, from, count int) []inboxstore.ClaimedRow {
		d := &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`)}
		for i := from; i < from+count; i++ {
			d.Events = append(d.Events, inboxstore.IncomingEvent{ID: fmt.Sprintf("evt_%02d", i), Type: typ, Payload: []byte(`{}`)})
		}
		res, err := b.ingester.Ingest(context.Background(), d)
		require.NoError(t, err)
		require.Equal(t, count, res.New)
		return res.Claimed
	}
	ingest("slow", 0, slow)
	// Both slow events run alone (each left its group over its slice), on
	// the two transactions, until their time is up.
	for range slow {
		await(t, entered, "the held handler to begin")
	}
	for _, row := range ingest("account.deposit", slow, quick) {
		b.waitStatus(t, row.ID, inbox.StatusDone)
		attempts, jobErrors := b.charged(t, row.EventID)
		require.Equal(t, 1, attempts, "%s: done at its first attempt", row.EventID)
		require.Zero(t, jobErrors, "%s: no failed attempt charged", row.EventID)
		require.Equal(t, 1, b.effects(t, row.EventID))
	}
}

func TestStopDeletesTheRecordThroughADatabaseRestart(t *testing.T) {
	t.Parallel()

	// The soak (issue 40, seed 202 at 30 minutes): a worker stopped as a
	// route change retired it, while PostgreSQL restarted, failed to delete
	// its routes record once ("terminating connection due to administrator
	// command") and exited 1, leaving the record to its TTL. Here the first
	// delete fails the same way; Stop tries again and the record goes.
	b := setup(t)
	ctx := context.Background()
	_, err := b.db.Pool.Exec(ctx, `
-- nextval is not rolled back with the refused statement.
CREATE SEQUENCE delete_tries;
CREATE FUNCTION refuse_first_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('delete_tries') = 1 THEN
        RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '57P01';
    END IF;
    RETURN OLD;
END $$;`)
	require.NoError(t, err)
	w := b.start(t, nil)
	_, err = b.db.Pool.Exec(ctx, `CREATE TRIGGER refuse_first_delete BEFORE DELETE ON hookinbox_worker_routes FOR EACH ROW EXECUTE FUNCTION refuse_first_delete()`)
	require.NoError(t, err)
	require.NoError(t, w.Stop(ctx))
	var left int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_worker_routes`).Scan(&left))
	require.Zero(t, left, "the stopped worker's records")
}

func TestAnEventThatWaitedForATransactionIsNotChargedForTheTimeItNeeds(t *testing.T) {
	t.Parallel()

	// TestAnEventThatWaitedForATransactionIsNotCharged's promise for an
	// event that needs more than a grouped event's time (a tenth of
	// job_timeout and half again) but well within its job_timeout: here 3 s
	// of 6 s. Two slow neighbours hold the worker's two event transactions
	// (max_conns 6) for 4 s of its job's 6; it gets one with 2 s left,
	// more than the 0.9 s the worker asks of a run before its handlers
	// begin; they begin and run out of time: charged an attempt for its
	// neighbours' time, as the quick events of the soak's seed 788135
	// were. Run again with all its time, it is done.
	b := setup(t)
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const jobTimeout = 6 * time.Second
	hold := newGate(2)
	b.startDefaults(t, pool, func(c *worker.Config) {
		c.JobTimeout = jobTimeout
		c.MaxAttempts = 3
		c.Registry.Register("hold", hold.handler)
		c.Registry.Register("steady", func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
			_, err := tx.Exec(ctx, `SELECT pg_sleep(3)`)
			return err
		})
		// Each in a transaction of its own.
		c.Routes = []worker.Route{
			{Source: "bank", Types: []string{"hold"}, Handlers: []string{"hold"}, Isolation: worker.IsolationReadCommitted},
			{Source: "bank", Handlers: []string{"effect", "steady"}, Isolation: worker.IsolationReadCommitted},
		}
	})
	ctx := context.Background()
	for _, id := range []string{"evt_hold_1", "evt_hold_2"} {
		_, err := b.ingester.Ingest(ctx, delivery(id, "hold"))
		require.NoError(t, err)
	}
	for range 2 {
		await(t, hold.entered, "the held handler to begin")
	}
	res, err := b.ingester.Ingest(ctx, delivery("evt_steady", "account.deposit"))
	require.NoError(t, err)
	id := res.Claimed[0].ID
	// The neighbours hold the transactions until 2 s of the event's job
	// time are left.
	var holdFor time.Duration
	poll(t, 30*time.Second, "the event's job to run", func() (bool, error) {
		var ms *float64
		err := b.db.Pool.QueryRow(ctx, `
SELECT extract(epoch FROM attempted_at + $2 * interval '1 millisecond' - now()) * 1000
FROM river_job WHERE id = $1 AND state = 'running'`, b.row(t, id).JobID, (jobTimeout - 2*time.Second).Milliseconds()).Scan(&ms)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if ms != nil {
			holdFor = time.Duration(*ms) * time.Millisecond
		}
		return true, err
	})
	time.AfterFunc(holdFor, func() { close(hold.release) })
	b.waitStatus(t, id, inbox.StatusDone)
	attempts, jobErrors := b.charged(t, "evt_steady")
	require.Zero(t, jobErrors, "failed attempts charged to an event that waited for its transaction")
	require.Equal(t, 1, attempts, "done at its first attempt")
	require.Equal(t, 1, b.effects(t, "evt_steady"))
}

func TestAPauseCheckThatRunsOutOfTimeIsNotCharged(t *testing.T) {
	t.Parallel()

	// Found by the review of issue 41's refactor: a job of a paused source
	// checks the pause before anything else and holds its row, in a
	// statement that waits for the pause's row lock (a Resume's first batch
	// holds it until it commits, an operator's pause or resume too). A
	// check that waited out the job's time returned that error to River
	// as it was: an attempt charged though no handler began, and, at the
	// last attempt, a discarded job whose row nothing would hold or run.
	// It is put back uncharged now, like any run whose time ran out before
	// its handlers began.
	b := setup(t)
	ctx := context.Background()
	w := b.start(t, func(c *worker.Config) {
		c.JobTimeout = time.Second
		c.MaxAttempts = 1
		c.PauseRefresh = 100 * time.Millisecond
	})
	_, err := b.store.Pause(ctx, "bank", "test", "")
	require.NoError(t, err)
	poll(t, 30*time.Second, "the worker to see the pause", func() (bool, error) { return w.SeesPaused("bank"), nil })

	lock, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, `SELECT 1 FROM hookinbox_source_pause WHERE source = 'bank' FOR UPDATE`)
	require.NoError(t, err)

	id := b.ingest(t, "evt_late_check", "account.deposit")
	jobID := b.row(t, id).JobID
	// The first run's pause check waits on the lock until the job's time
	// is up; its outcome is either a snooze or an error.
	poll(t, 30*time.Second, "the first run to end", func() (bool, error) {
		var ended bool
		err := b.db.Pool.QueryRow(ctx, `
SELECT coalesce((metadata->>'snoozes')::int, 0) > 0 OR errors IS NOT NULL FROM river_job WHERE id = $1`, jobID).Scan(&ended)
		return ended, err
	})
	_, jobErrors := b.charged(t, "evt_late_check")
	require.Zero(t, jobErrors, "an attempt charged to a run whose handlers never began")
	require.NoError(t, lock.Rollback(ctx))

	// The next run holds the row for Resume, which runs it once.
	poll(t, 30*time.Second, "the row to be held", func() (bool, error) {
		var held bool
		err := b.db.Pool.QueryRow(ctx, `SELECT held_at IS NOT NULL FROM webhook_inbox WHERE id = $1`, id).Scan(&held)
		return held, err
	})
	_, err = b.store.Resume(ctx, &inboxstore.ResumeParams{Source: "bank", Client: b.client, QueueFor: func(string) string { return river.QueueDefault }})
	require.NoError(t, err)
	require.Equal(t, 1, b.waitStatus(t, id, inbox.StatusDone).Attempts)
	require.Equal(t, 1, b.effects(t, "evt_late_check"))
}

func TestARunThatFailsForWantOfTheDatabaseIsNotCharged(t *testing.T) {
	t.Parallel()

	// The 30-minute soak (issue 40, seed 303): runs that lost PostgreSQL
	// (restarting, a backend terminated) or could not record their failure
	// returned the error to River as it was. River counted each as a failed
	// attempt the row never saw: an event that met an outage at each retry
	// had River's backoff grow to 21 minutes, and max_attempts would have
	// discarded it, failed for nothing it did. Now such a run is put back,
	// snoozed: no attempt on the row, none in River.
	for name, tc := range map[string]struct {
		// handler fails the event's first run, for want of the database.
		handler func(ctx context.Context, tx pgx.Tx) error
		// setup prepares the database for it.
		setup string
	}{
		"ItsConnectionBroke": {
			// What a failover or a terminated backend does to a running
			// handler.
			handler: func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
				return err
			},
		},
		"ItsFailureCouldNotBeRecorded": {
			// The handler fails; the database refuses the failure's record,
			// as an unreachable one would.
			handler: func(context.Context, pgx.Tx) error { return errors.New("downstream said no") },
			setup: `
CREATE FUNCTION refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.last_error LIKE '%downstream said no%' THEN
        RAISE EXCEPTION 'the failure cannot be recorded';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_record BEFORE UPDATE ON webhook_inbox FOR EACH ROW EXECUTE FUNCTION refuse_record();`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			if tc.setup != "" {
				_, err := b.db.Pool.Exec(ctx, tc.setup)
				require.NoError(t, err)
			}
			var runs atomic.Int64
			b.start(t, func(c *worker.Config) {
				c.Registry.Register("first-run-fails", func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
					if runs.Add(1) == 1 {
						return tc.handler(ctx, tx)
					}
					return nil
				})
				// In a transaction of its own: a group's transaction that
				// broke works its events again alone, charging none.
				c.Routes = []worker.Route{{Source: "bank", Handlers: []string{"effect", "first-run-fails"}, Isolation: worker.IsolationReadCommitted}}
			})
			id := b.ingest(t, "evt_want_of_db", "account.deposit")
			b.waitStatus(t, id, inbox.StatusDone)
			require.EqualValues(t, 2, runs.Load(), "runs of the handler")
			attempts, jobErrors := b.charged(t, "evt_want_of_db")
			require.Zero(t, jobErrors, "attempts River counted for a run that failed for want of the database")
			require.Equal(t, 1, attempts, "done at its first charged attempt")
			require.Equal(t, 1, b.effects(t, "evt_want_of_db"))
			var putBacks, snoozes int
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (metadata->>'hookinbox:put_backs')::int, (metadata->>'snoozes')::int FROM river_job WHERE id = $1`,
				b.row(t, id).JobID).Scan(&putBacks, &snoozes))
			require.Equal(t, 1, putBacks, "put-backs counted in the job's metadata")
			require.Equal(t, 1, snoozes, "River's snoozes")
		})
	}
}

func TestAHandlerThatBreaksItsConnectionEveryTimeStillFails(t *testing.T) {
	t.Parallel()

	// Found by the review of d051961: a run whose connection broke was put
	// back uncharged however often it happened, and the worker cannot tell
	// a database that went away from a handler that breaks its own
	// connection at every run (a statement that crashes its backend, a
	// sub-timeout that makes pgx close it). Such an event stayed pending
	// for ever, uncharged, and held its sequence key. Now a job is put back
	// so at most unchargedRuns (3) times; then it is charged, and fails
	// after max_attempts (3 here), River and the row counting alike.
	for name, breaker := range map[string]func(ctx context.Context, tx pgx.Tx) error{
		"KillsItsBackend": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			return err
		},
		"IgnoresItsStatementTimingOut": func(ctx context.Context, tx pgx.Tx) error {
			// pgx closes the connection when the statement's context ends;
			// the COMMIT then fails.
			sub, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, _ = tx.Exec(sub, `SELECT pg_sleep(2)`)
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var runs atomic.Int64
			b.start(t, func(c *worker.Config) {
				c.Registry.Register("breaker", func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
					runs.Add(1)
					return breaker(ctx, tx)
				})
				c.Routes = []worker.Route{{Source: "bank", Handlers: []string{"effect", "breaker"}, Isolation: worker.IsolationReadCommitted}}
			})
			id := b.ingest(t, "evt_breaker", "account.deposit")
			r := b.waitStatus(t, id, inbox.StatusFailed)
			require.Equal(t, 3, r.Attempts, "attempts charged to the row")
			poll(t, 30*time.Second, "River to discard the job", func() (bool, error) { return b.jobState(t, id) == "discarded", nil })
			_, jobErrors := b.charged(t, "evt_breaker")
			require.Equal(t, 3, jobErrors, "attempts River counted")
			require.EqualValues(t, 6, runs.Load(), "runs: three put back, three charged")
			require.Zero(t, b.effects(t, "evt_breaker"))
		})
	}
}

// lostConnections is pkg/worker's unchargedRuns: how many lost
// connections a job is put back uncharged for.
const lostConnections = 3

// startCutQueue makes a write of queue qb's row by a client connecting as
// startcut sleep past River's 10-s bound while start_cut_slow says so.
const startCutQueue = `
CREATE TABLE start_cut_slow (slow bool NOT NULL);
INSERT INTO start_cut_slow VALUES (true);
CREATE FUNCTION start_cut_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = 'startcut' AND NEW.name = 'qb' AND (SELECT slow FROM start_cut_slow) THEN
        PERFORM pg_sleep(11);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER start_cut_slow BEFORE INSERT OR UPDATE ON river_queue FOR EACH ROW EXECUTE FUNCTION start_cut_slow();`

// TestRunsStartsCutSpendNoLostConnectionPutBacks: a run River's failed
// start cut is put back apart from the put-backs of a lost connection
// (unchargedRuns of them per job), which it used to spend: after three
// cuts, an event's next lost connections were charged, and with
// max_attempts 2 it failed for good though its handler never failed (a
// helper's attack on 6ee9dcb).
//
// By construction: the worker works the default queue, where the event
// waits, and qb, whose row's write sleeps past River's bound; each start
// that began the default queue first cuts the event's run, which waits in
// its handler (the rollout loop starts the worker again each second, and
// the order of the queues is River's: the test waits for two cuts). Then
// the write is fast, and the test terminates the handler's backend
// lostConnections times, as failovers would: each must be put back, and
// the event done. Had the cuts spent put-backs, the last two would be
// charged, the second at the last of max_attempts 2.
func TestRunsStartsCutSpendNoLostConnectionPutBacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.db.Pool.Exec(ctx, startCutQueue)
	require.NoError(t, err)
	u, err := url.Parse(b.db.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", "startcut")
	q.Set("pool_max_conns", "12")
	u.RawQuery = q.Encode()

	var open atomic.Bool
	reg := b.registry(t)
	reg.Register("gate", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		if open.Load() {
			_, err := tx.Exec(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, ev.EventID)
			return err
		}
		// Until its run is cut, or its backend terminated.
		_, err := tx.Exec(ctx, `SELECT pg_sleep(60) /* start_cut_gate */`)
		return err
	})
	w, err := worker.New(newPool(t, u.String()), &worker.Config{
		Queues:            map[string]int{river.QueueDefault: 2, "qb": 2},
		MaxAttempts:       2,
		JobTimeout:        90 * time.Second,
		ReaperInterval:    time.Hour,
		HeartbeatInterval: 30 * time.Second,
		SoftStopTimeout:   time.Second,
		Routes:            []worker.Route{{Source: "bank", Handlers: []string{"gate"}, Isolation: worker.IsolationReadCommitted}},
		Sources:           map[string]string{"bank": river.QueueDefault},
		Registry:          reg,
		Logger:            zaptest.NewLogger(t),
		RiverConfig: func(rc *river.Config) {
			rc.RetryPolicy = fastRetry{}
			rc.FetchCooldown = 5 * time.Millisecond
			rc.FetchPollInterval = 20 * time.Millisecond
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		open.Store(true)
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = w.Stop(stopCtx)
	})

	id := b.ingest(t, "evt_start_cut", "account.deposit")
	// The event's newest job: its runs cut, its put-backs, its state.
	job := func() (cuts, putBacks int, state string) {
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT coalesce((metadata->>'hookinbox:start_cuts')::int, 0),
  coalesce((metadata->>'hookinbox:put_backs')::int, 0), state::text
FROM river_job WHERE kind = 'hookinbox.event' AND (args->>'inbox_id')::bigint = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&cuts, &putBacks, &state))
		return cuts, putBacks, state
	}
	// A put-back is a snooze, which River's scheduler makes available
	// again; a client whose start keeps failing runs it only now and then
	// (a clean-clone make test saw two cuts in five minutes), so the test
	// stands in for it.
	schedule := func() error {
		_, err := b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now()
WHERE kind = 'hookinbox.event' AND (args->>'inbox_id')::bigint = $1 AND state = 'scheduled'`, id)
		return err
	}
	_ = w.Start(ctx) // fails while qb's write is slow; the rollout loop starts it again
	poll(t, 5*time.Minute, "two runs cut by River's failed starts", func() (bool, error) {
		cuts, putBacks, _ := job() // no connection lost yet: a put-back is a cut
		return cuts+putBacks >= 2, schedule()
	})
	_, err = b.db.Pool.Exec(ctx, `UPDATE start_cut_slow SET slow = false`)
	require.NoError(t, err)

	// A cut run's statement outlives it in its backend (pg_sleep does not
	// notice the client gone): only a backend whose statement began after
	// the job's latest fetch is the running one's.
	for kill := 1; kill <= lostConnections; kill++ {
		poll(t, 3*time.Minute, "the event's handler running", func() (bool, error) {
			if err := schedule(); err != nil {
				return false, err
			}
			var n int
			err := b.db.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity AS a, river_job AS j
WHERE j.kind = 'hookinbox.event' AND (j.args->>'inbox_id')::bigint = $1 AND j.state = 'running'
  AND a.datname = current_database() AND a.state = 'active' AND a.query LIKE '%start_cut_gate%'
  AND a.query_start > j.attempted_at AND a.pid <> pg_backend_pid()`, id).Scan(&n)
			return n > 0, err
		})
		poll(t, time.Minute, "the run whose connection was lost put back", func() (bool, error) {
			_, putBacks, state := job()
			return putBacks >= kill && state != "running", nil
		})
	}
	open.Store(true)
	var r *row
	poll(t, 2*time.Minute, "the event settled", func() (bool, error) {
		r = b.row(t, id)
		return r.Status == inbox.StatusDone || r.Status == inbox.StatusFailed, nil
	})
	require.Equal(t, inbox.StatusDone, r.Status, "the event failed for good, though it lost its connection only %d times: %s", lostConnections, r.LastError)
	attempts, jobErrors := b.charged(t, "evt_start_cut")
	cuts, putBacks, _ := job()
	require.GreaterOrEqual(t, cuts, 2, "the runs River's failed starts cut, counted apart")
	require.Zero(t, jobErrors, "attempts River counted for runs a failed start cut, or that lost their connection")
	require.Equal(t, 1, attempts, "done at its first charged attempt")
	require.Equal(t, lostConnections, putBacks, "the lost connections' put-backs, counted apart from the cuts")
	require.Equal(t, 1, b.effects(t, "evt_start_cut"))
}
