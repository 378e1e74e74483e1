package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// fastRetry retries at once, so tests need not wait out River's backoff.
type fastRetry struct{}

func (fastRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

type testBundle struct {
	db *dbtest.DB
	// client is an insert-only River client on db, as a receiver (or River
	// UI) has: it enqueues and retries jobs that a started worker works.
	client   *river.Client[pgx.Tx]
	ingester *inboxstore.Ingester
	store    *inboxstore.Store
	// flakyFailures is how many more runs of the "flaky" handler fail. A
	// count, not a switch a test turns off after the first failure: River
	// retries at once (fastRetry), so on a busy machine every attempt could
	// fail before the test saw the first.
	flakyFailures atomic.Int64
	// poisoned makes the sequence tests' "poison" event fail while set.
	poisoned atomic.Bool
	// runs counts handler runs per event id, committed or not.
	runs sync.Map
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(context.Background(), `CREATE TABLE effects (event_id text NOT NULL)`)
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 3})
	require.NoError(t, err)
	return &testBundle{db: db, client: client, ingester: inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}), store: inboxstore.New(db.Pool)}
}

func (b *testBundle) registry(t *testing.T) *worker.Registry {
	r := worker.NewRegistry(zaptest.NewLogger(t))
	r.Register("effect", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		n, _ := b.runs.LoadOrStore(ev.EventID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		_, err := tx.Exec(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, ev.EventID)
		return err
	})
	r.Register("flaky", func(context.Context, pgx.Tx, inbox.Event) error {
		if b.flakyFailures.Add(-1) >= 0 {
			return errors.New("downstream unavailable")
		}
		return nil
	})
	r.Register("failing", func(context.Context, pgx.Tx, inbox.Event) error { return errors.New("always broken") })
	r.Register("permanent", func(context.Context, pgx.Tx, inbox.Event) error {
		return inbox.Permanent(errors.New("cannot ever work"))
	})
	r.Register("panicking", func(context.Context, pgx.Tx, inbox.Event) error { panic("handler bug") })
	return r
}

var routes = []worker.Route{
	{Source: "*", Types: []string{"flaky"}, Handlers: []string{"effect", "flaky"}},
	{Source: "*", Types: []string{"failing"}, Handlers: []string{"effect", "failing"}},
	{Source: "*", Types: []string{"permanent"}, Handlers: []string{"effect", "permanent"}},
	{Source: "*", Types: []string{"panicking"}, Handlers: []string{"panicking"}},
	{Source: "bank", Types: []string{"account.*"}, Handlers: []string{"effect"}},
}

// sources are the tests' sources and their queues.
var sources = map[string]string{"bank": river.QueueDefault}

// start runs a worker on the bundle's database until the test ends.
func (b *testBundle) start(t *testing.T, mutate func(*worker.Config)) *worker.Worker {
	t.Helper()
	cfg := &worker.Config{
		Queues:         map[string]int{river.QueueDefault: 4},
		MaxAttempts:    3,
		JobTimeout:     10 * time.Second,
		ReaperInterval: time.Hour, // runs once, at start
		Routes:         routes,
		Sources:        sources,
		Registry:       b.registry(t),
		Logger:         zaptest.NewLogger(t),
		RiverConfig: func(rc *river.Config) {
			rc.RetryPolicy = fastRetry{}
			rc.FetchCooldown = 5 * time.Millisecond
			rc.FetchPollInterval = 20 * time.Millisecond
		},
	}
	return runWorker(t, b.db.Pool, cfg, mutate)
}

// runWorker applies mutate (when set) to cfg, then starts a worker on pool
// until the test ends.
func runWorker(t *testing.T, pool *pgxpool.Pool, cfg *worker.Config, mutate func(*worker.Config)) *worker.Worker {
	t.Helper()
	if mutate != nil {
		mutate(cfg)
	}
	w, err := worker.New(pool, cfg)
	require.NoError(t, err)
	// Stopped even when Start fails: a failed Start leaves the pause watch
	// running, which would log after the test ended.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
	require.NoError(t, w.Start(context.Background()))
	return w
}

// delivery returns a delivery of one event of source bank.
func delivery(eventID, eventType string) *inboxstore.Delivery {
	return &inboxstore.Delivery{
		Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
		Events: []inboxstore.IncomingEvent{{ID: eventID, Type: eventType, Payload: []byte(`{}`)}},
	}
}

func (b *testBundle) ingest(t *testing.T, eventID, eventType string) int64 {
	t.Helper()
	res, err := b.ingester.Ingest(context.Background(), delivery(eventID, eventType))
	require.NoError(t, err)
	require.Equal(t, 1, res.New)
	return res.Claimed[0].ID
}

// row is what the tests read of an inbox row.
type row struct {
	Status    inbox.Status
	Attempts  int
	LastError string
	Note      string
	JobID     int64
}

// row reads the inbox row id.
func (b *testBundle) row(t *testing.T, id int64) *row {
	t.Helper()
	var r row
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
SELECT status, attempts, coalesce(last_error, ''), coalesce(note, ''), coalesce((SELECT max(j.id) FROM river_job AS j WHERE j.kind = 'hookinbox.event' AND j.args @> jsonb_build_object('inbox_id', i.id)), 0)
FROM webhook_inbox AS i WHERE id = $1`, id).Scan(&r.Status, &r.Attempts, &r.LastError, &r.Note, &r.JobID))
	return &r
}

// poll calls cond every 10 ms, in the test's own goroutine (so that cond
// may use require), until it holds; an error from cond fails the test at
// once, and so does timeout passing.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		require.NoError(t, err, what)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// await receives from ch, failing the test (instead of hanging the
// package until go test's timeout) when nothing comes within 30 seconds.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out after 30s waiting for %s", what)
		panic("unreachable")
	}
}

// waitStatus polls the row until it reaches status, with a deadline.
func (b *testBundle) waitStatus(t *testing.T, id int64, status inbox.Status) *row {
	t.Helper()
	var r *row
	poll(t, 30*time.Second, fmt.Sprintf("row %d to become %s", id, status), func() (bool, error) {
		r = b.row(t, id)
		return r.Status == status, nil
	})
	return r
}

func (b *testBundle) effects(t *testing.T, eventID string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM effects WHERE event_id = $1`, eventID).Scan(&n))
	return n
}

func (b *testBundle) jobState(t *testing.T, id int64) string {
	t.Helper()
	var state string
	jobID := b.row(t, id).JobID
	poll(t, 30*time.Second, fmt.Sprintf("job %d to finish", jobID), func() (bool, error) {
		err := b.db.Pool.QueryRow(context.Background(), `SELECT state::text FROM river_job WHERE id = $1`, jobID).Scan(&state)
		return state != "running" && state != "available", err
	})
	return state
}

func TestWorker(t *testing.T) {
	t.Parallel()

	t.Run("EventIsProcessedOnceAndMarkedDone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		id := b.ingest(t, "evt_1", "account.deposit")
		ev := b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 1, ev.Attempts)
		require.Equal(t, 1, b.effects(t, "evt_1"))
		require.Equal(t, "completed", b.jobState(t, id))
	})

	t.Run("HandlerThatFailsThenSucceedsAppliesItsEffectOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.flakyFailures.Store(1)
		b.start(t, nil)
		id := b.ingest(t, "evt_flaky", "flaky")
		ev := b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 2, ev.Attempts)
		require.Empty(t, ev.LastError, "a done row has no last error")
		info, err := b.store.Lookup(context.Background(), "bank", "evt_flaky")
		require.NoError(t, err)
		require.Len(t, info.AttemptErrors, 1, "its history keeps the failed attempt")
		require.Equal(t, "downstream unavailable", info.AttemptErrors[0].Error)
		require.Equal(t, 1, b.effects(t, "evt_flaky"))
	})

	// An enqueuer with another configuration (a receiver, inboxctl) stamps
	// its own max_attempts; the worker's decides.
	for _, tc := range []struct{ stamped, worker int }{{stamped: 10, worker: 2}, {stamped: 1, worker: 3}} {
		t.Run(fmt.Sprintf("WorkerMaxAttemptsDecidesOverAStampOf%d", tc.stamped), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{MaxAttempts: tc.stamped})
			require.NoError(t, err)
			b.ingester = inboxstore.NewIngester(b.db.Pool, client, &inboxstore.IngesterConfig{})
			b.start(t, func(c *worker.Config) { c.MaxAttempts = tc.worker })
			id := b.ingest(t, "evt_poison", "failing")
			ev := b.waitStatus(t, id, inbox.StatusFailed)
			require.Equal(t, tc.worker, ev.Attempts)
			require.Equal(t, "discarded", b.jobState(t, id))
			var attempt, maxAttempts int
			require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT attempt, max_attempts FROM river_job WHERE id = $1`,
				b.row(t, id).JobID).Scan(&attempt, &maxAttempts))
			require.Equal(t, [2]int{tc.worker, tc.worker}, [2]int{attempt, maxAttempts}, "River's job shows the worker's attempts")
		})
	}

	t.Run("PoisonEventFailsAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		id := b.ingest(t, "evt_poison", "failing")
		ev := b.waitStatus(t, id, inbox.StatusFailed)
		require.Equal(t, 3, ev.Attempts)
		require.Equal(t, "always broken", ev.LastError)
		require.Zero(t, b.effects(t, "evt_poison"))
		require.Equal(t, "discarded", b.jobState(t, id))
	})

	t.Run("PermanentErrorFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		id := b.ingest(t, "evt_perm", "permanent")
		ev := b.waitStatus(t, id, inbox.StatusFailed)
		require.Equal(t, 1, ev.Attempts)
		require.Contains(t, ev.LastError, "cannot ever work")
		require.Zero(t, b.effects(t, "evt_perm"))
		require.Equal(t, "cancelled", b.jobState(t, id))
	})

	t.Run("PanickingHandlerIsRetriedAndRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		id := b.ingest(t, "evt_panic", "panicking")
		ev := b.waitStatus(t, id, inbox.StatusFailed)
		require.Equal(t, 3, ev.Attempts)
		require.Contains(t, ev.LastError, "handler panicked: handler bug")
	})

	t.Run("UnroutedEventIsDoneWithANoteWhenConfigured", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, func(c *worker.Config) { c.UnroutedDone = true })
		id := b.ingest(t, "evt_x", "unknown.type")
		require.Contains(t, b.waitStatus(t, id, inbox.StatusDone).Note, "no route matched")
	})

	t.Run("UnroutedEventFailsByDefault", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		id := b.ingest(t, "evt_x", "unknown.type")
		ev := b.waitStatus(t, id, inbox.StatusFailed)
		require.Contains(t, ev.LastError, `no route matches source "bank", type "unknown.type"`)
	})

	t.Run("EventOfAnUnknownSourceWaitsForAWorkerThatKnowsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A receiver with a newer configuration took an event of "shop",
		// a source this worker's configuration does not name.
		res, err := b.ingester.Ingest(context.Background(), &inboxstore.Delivery{
			Source: "shop", Provider: "standardwebhooks", Body: []byte(`{}`),
			Events: []inboxstore.IncomingEvent{{ID: "evt_new_source", Type: "account.deposit", Payload: []byte(`{}`)}},
		})
		require.NoError(t, err)
		id := res.Claimed[0].ID
		b.start(t, nil)
		// The old worker snoozes it (River counts no attempt) and leaves the
		// row pending, instead of failing it as unrouted.
		jobID := b.row(t, id).JobID
		poll(t, 30*time.Second, "the job to be snoozed twice", func() (bool, error) {
			var snoozes int
			err := b.db.Pool.QueryRow(context.Background(),
				`SELECT coalesce((metadata ->> 'snoozes')::int, 0) FROM river_job WHERE id = $1`, jobID).Scan(&snoozes)
			return snoozes >= 2, err
		})
		r := b.row(t, id)
		require.Equal(t, inbox.StatusPending, r.Status)
		require.Zero(t, r.Attempts)
		// A worker whose configuration names the source takes the queue
		// over (the rollout) and settles it.
		b.start(t, func(c *worker.Config) {
			c.Sources = map[string]string{"bank": river.QueueDefault, "shop": river.QueueDefault}
			c.Routes = append([]worker.Route{{Source: "shop", Handlers: []string{"effect"}}}, routes...)
		})
		require.Equal(t, inbox.StatusDone, b.waitStatus(t, id, inbox.StatusDone).Status)
		require.Equal(t, 1, b.effects(t, "evt_new_source"))
	})

	t.Run("DoneRowIsNeverProcessedAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		id := b.ingest(t, "evt_1", "account.deposit")
		b.waitStatus(t, id, inbox.StatusDone)
		// A stray second job for the same row (a replay of a done event).
		res, err := b.client.Insert(context.Background(), inboxstore.JobArgs{InboxID: id}, nil)
		require.NoError(t, err)
		poll(t, 30*time.Second, "the stray job to complete", func() (bool, error) {
			job, err := b.client.JobGet(context.Background(), res.Job.ID)
			return err == nil && job.State == rivertype.JobStateCompleted, err
		})
		require.Equal(t, 1, b.effects(t, "evt_1"))
	})

	t.Run("HandlersRunWithAsyncCommitAndDefaultPlanning", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seen := make(chan [2]string, 1)
		b.start(t, func(c *worker.Config) {
			c.Registry.Register("settings", func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
				var s [2]string
				err := tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode'), current_setting('synchronous_commit')`).Scan(&s[0], &s[1])
				select {
				case seen <- s: // the first run's view is the one checked
				default:
				}
				return err
			})
			c.Routes = []worker.Route{{Source: "*", Handlers: []string{"settings"}}}
		})
		id := b.ingest(t, "evt_settings", "account.deposit")
		b.waitStatus(t, id, inbox.StatusDone)
		// synchronous_commit is off for the worker's transaction only, and
		// the handlers are planned as the server would plan them.
		require.Equal(t, [2]string{"auto", "off"}, <-seen)
		var commit string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT current_setting('synchronous_commit')`).Scan(&commit))
		require.Equal(t, "on", commit)
		var mode string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT current_setting('plan_cache_mode')`).Scan(&mode))
		require.Equal(t, "auto", mode)
	})

	t.Run("RetryingAFailedRowsJobReplaysIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.flakyFailures.Store(math.MaxInt32)
		b.start(t, nil)
		id := b.ingest(t, "evt_replay", "flaky")
		b.waitStatus(t, id, inbox.StatusFailed)
		require.Equal(t, "discarded", b.jobState(t, id))
		b.flakyFailures.Store(0)

		ev := b.row(t, id)
		_, err := b.client.JobRetry(context.Background(), ev.JobID) // what River UI's retry button does
		require.NoError(t, err)
		done := b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, ev.Attempts+1, done.Attempts)
		require.Equal(t, 1, b.effects(t, "evt_replay"))
	})
}

func TestReaper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OrphanedPendingRowIsRequeuedAndProcessed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A row claimed with no job (as by a build that crashed between
		// claim and enqueue, or a job deleted by hand), received long ago.
		claimed, err := b.store.Claim(ctx, b.db.Pool, []*inboxstore.Delivery{delivery("evt_orphan", "account.deposit")}, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Minute })
		b.waitStatus(t, claimed[0].ID, inbox.StatusDone)
		require.Equal(t, 1, b.effects(t, "evt_orphan"))
	})

	t.Run("RecentPendingRowIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		claimed, err := b.store.Claim(ctx, b.db.Pool, []*inboxstore.Delivery{delivery("evt_young", "account.deposit")}, time.Now())
		require.NoError(t, err)
		w := b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		// Wait for the reaper's run at start to finish, then look.
		poll(t, 30*time.Second, "the reaper's first run", func() (bool, error) {
			var n int
			err := b.db.Pool.QueryRow(ctx,
				`SELECT count(*) FROM river_job WHERE kind = 'hookinbox.reaper' AND state = 'completed'`).Scan(&n)
			return n == 1, err
		})
		require.Equal(t, inbox.StatusPending, b.row(t, claimed[0].ID).Status)
		_ = w
	})

	t.Run("RowWhoseJobWasDiscardedIsFailedNotLooped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Received an hour ago.
		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{MaxAttempts: 3})
		require.NoError(t, err)
		ingester := inboxstore.NewIngester(b.db.Pool, client, &inboxstore.IngesterConfig{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		res, err := ingester.Ingest(ctx, delivery("evt_lost", "account.deposit"))
		require.NoError(t, err)
		id := res.Claimed[0].ID
		// The worker died on the last attempt: River's rescuer discarded
		// the job, and the failure never reached the row.
		_, err = b.db.Pool.Exec(ctx, `
UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = max_attempts,
       errors = ARRAY[jsonb_build_object('error', 'worker died', 'attempt', 3, 'at', now())]
WHERE id = $1`, b.row(t, id).JobID)
		require.NoError(t, err)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Minute })
		ev := b.waitStatus(t, id, inbox.StatusFailed)
		require.Equal(t, "job discarded: worker died", ev.LastError)
		require.Zero(t, b.effects(t, "evt_lost"))
	})
}

func TestTwoWorkersRacingOverTheSameRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 200
	ids := make([]int64, n)
	for i := range n {
		ids[i] = b.ingest(t, fmt.Sprintf("evt_%03d", i), "account.deposit")
	}
	// A second job per row, so that both workers really race for each row.
	client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{})
	require.NoError(t, err)
	params := make([]river.InsertManyParams, n)
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: inboxstore.JobArgs{InboxID: id}}
	}
	_, err = client.InsertMany(ctx, params)
	require.NoError(t, err)

	other := &testBundle{db: &dbtest.DB{Pool: newPool(t, b.db.URL)}}
	b.start(t, nil)
	other.runs = sync.Map{}
	otherWorker := func() {
		cfg := &worker.Config{
			Queues: map[string]int{river.QueueDefault: 4}, MaxAttempts: 3, ReaperInterval: time.Hour,
			Routes: routes, Sources: sources, Registry: b.registry(t), Logger: zaptest.NewLogger(t),
			RiverConfig: func(rc *river.Config) { rc.FetchCooldown = 5 * time.Millisecond },
		}
		w, err := worker.New(other.db.Pool, cfg)
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, w.Stop(stopCtx))
		})
	}
	otherWorker()

	b.requireEachDoneOnce(t, n)
}

// requireEachDoneOnce waits until the bundle's n rows are done, then
// requires each event's effect exactly once.
func (b *testBundle) requireEachDoneOnce(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	poll(t, 120*time.Second, "every row to be done", func() (bool, error) {
		c, err := b.store.Count(ctx, nil)
		return err == nil && c.Done == int64(n), err
	})
	var total, distinct int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id) FROM effects`).Scan(&total, &distinct))
	require.Equal(t, n, total)
	require.Equal(t, n, distinct)
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
