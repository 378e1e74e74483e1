package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// otherRoutes settle bank's events with other handlers than routes do.
var otherRoutes = []worker.Route{{Source: "bank", Handlers: []string{"noop"}}}

// holdRoutes route bank's events to "hold" (see holdRegistry).
var holdRoutes = []worker.Route{{Source: "bank", Handlers: []string{"hold"}}}

// rolloutHeartbeat is the rollout tests' workers' HeartbeatInterval: they
// take over, and look for a newer route set, every second whatever it is,
// and a shorter one would let a record expire on a busy machine.
const rolloutHeartbeat = 10 * time.Second

// newWorker builds a worker on the bundle's database that the test starts,
// and stops as it ends.
func (b *testBundle) newWorker(t *testing.T, routes []worker.Route, queues map[string]int, registry *worker.Registry) *worker.Worker {
	t.Helper()
	if registry == nil {
		registry = b.registry(t)
	}
	w, err := worker.New(b.db.Pool, &worker.Config{
		Queues: queues, ReaperInterval: time.Hour, Routes: routes, Registry: registry, HeartbeatInterval: rolloutHeartbeat,
		Sources: map[string]string{"bank": river.QueueDefault, "other": "other"}, Logger: zaptest.NewLogger(t),
		RiverConfig: func(rc *river.Config) { rc.FetchPollInterval = 20 * time.Millisecond },
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
	return w
}

// holdRegistry has the test registry's handlers and "hold", which reports
// each run on started and returns once release is closed.
func (b *testBundle) holdRegistry(t *testing.T, started chan<- string, release <-chan struct{}) *worker.Registry {
	r := b.registry(t)
	r.Register("hold", func(ctx context.Context, _ pgx.Tx, ev inbox.Event) error {
		select {
		case started <- ev.EventID:
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
	return r
}

func (b *testBundle) records(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM hookinbox_worker_routes`).Scan(&n))
	return n
}

// recordState returns the state of the only record of the worker whose
// routes on queue default are routes.
func (b *testBundle) recordState(t *testing.T, routes string) string {
	t.Helper()
	var state string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT state FROM hookinbox_worker_routes WHERE queue = 'default' AND routes = $1`, routes).Scan(&state))
	return state
}

// waitState polls until w is in state s.
func waitState(t *testing.T, w *worker.Worker, s worker.State) {
	t.Helper()
	poll(t, 30*time.Second, "state "+s.String(), func() (bool, error) { return w.State() == s, nil })
}

func TestWorkersSharingAQueueShareItsRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	defaultQueue := map[string]int{river.QueueDefault: 1}

	// The old worker holds an event in its handler: the new one, with
	// other routes, waits and works nothing while the old one drains; the
	// old one, once the event is released, retires for good and the new
	// one takes over.
	t.Run("OtherRoutesWaitForTheOldWorkerToHandOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		started, release := make(chan string, 1), make(chan struct{})
		old := b.newWorker(t, holdRoutes, defaultQueue, b.holdRegistry(t, started, release))
		require.NoError(t, old.Start(ctx))
		require.Equal(t, worker.StateWorking, old.State())
		held := b.ingest(t, "evt_held", "account.deposit")
		require.Equal(t, "evt_held", await(t, started, "the held handler to begin"))

		next := b.newWorker(t, otherRoutes, defaultQueue, nil)
		require.NoError(t, next.Start(ctx), "a worker with other routes waits instead of failing")
		require.Equal(t, worker.StateWaiting, next.State(), "the old worker still runs a job, so it cannot have handed over")
		waitState(t, old, worker.StateDraining)
		queued := b.ingest(t, "evt_queued", "account.deposit")
		require.Equal(t, worker.StateWaiting, next.State(), "the old worker still runs a job")
		require.Equal(t, "waiting", b.recordState(t, "bank * -> noop; unrouted -> failed"))
		require.Equal(t, "working", b.recordState(t, "bank * -> hold; unrouted -> failed"))
		require.Equal(t, inbox.StatusPending, b.row(t, queued).Status, "the draining worker took a new job, or the waiting one worked")

		close(release)
		waitState(t, next, worker.StateWorking)
		require.Equal(t, worker.StateRetired, old.State(), "the old worker deletes its record only once retired")
		require.Equal(t, 1, b.records(t), "the retired worker deleted its record")
		poll(t, 30*time.Second, "the queued event settled", func() (bool, error) {
			return b.row(t, queued).Status == inbox.StatusDone, nil
		})
		require.Equal(t, inbox.StatusDone, b.row(t, held).Status, "the held event was finished by the old worker")
		require.Zero(t, b.effects(t, "evt_queued"))
		require.Equal(t, worker.StateRetired, old.State(), "a retired worker never works again")
	})

	// A rollback: the earlier routes, started later, take the queue back
	// from the newer ones the same way; the first worker, retired, stays so.
	t.Run("ARollbackRollsOutTheSameWay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.newWorker(t, routes, defaultQueue, nil)
		require.NoError(t, first.Start(ctx))
		second := b.newWorker(t, otherRoutes, defaultQueue, nil)
		require.NoError(t, second.Start(ctx))
		waitState(t, second, worker.StateWorking)
		require.Equal(t, worker.StateRetired, first.State())
		third := b.newWorker(t, routes, defaultQueue, nil)
		require.NoError(t, third.Start(ctx))
		waitState(t, third, worker.StateWorking)
		require.Equal(t, worker.StateRetired, second.State())
		require.Equal(t, worker.StateRetired, first.State())
		require.Equal(t, 1, b.records(t))
		id := b.ingest(t, "evt_after_rollback", "account.deposit")
		poll(t, 30*time.Second, "the event settled", func() (bool, error) { return b.effects(t, "evt_after_rollback") == 1, nil })
		require.Equal(t, inbox.StatusDone, b.row(t, id).Status)
	})

	// A waiting record older than a starting worker does not make it wait:
	// the newer route set wins.
	t.Run("AnOlderWaitingRouteSetDoesNotBlockANewerOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.db.Pool.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, state, host, pid, started_at, expires_at)
VALUES ('older', 'default', 'bank * -> effect; unrouted -> done', 'waiting', 'gone', 1, now() - interval '1 hour', now() + interval '1 hour')`)
		require.NoError(t, err)
		w := b.newWorker(t, otherRoutes, defaultQueue, nil)
		require.NoError(t, w.Start(ctx))
		require.Equal(t, worker.StateWorking, w.State())
	})

	t.Run("SameRoutesShareAQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		w := b.newWorker(t, routes, defaultQueue, nil)
		require.NoError(t, w.Start(ctx))
		require.Equal(t, worker.StateWorking, w.State())
		require.Equal(t, 2, b.records(t))
		require.NoError(t, w.Stop(ctx))
		require.Equal(t, worker.StateStopped, w.State())
		require.Equal(t, 1, b.records(t), "Stop deletes the worker's record")
	})

	t.Run("OtherRoutesOnOtherQueuesAreAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		w := b.newWorker(t, []worker.Route{{Source: "other", Handlers: []string{"noop"}}}, map[string]int{"other": 1}, nil)
		require.NoError(t, w.Start(ctx))
		require.Equal(t, worker.StateWorking, w.State())
	})

	t.Run("AStoppedWorkerMakesRoomForOtherRoutes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.newWorker(t, routes, defaultQueue, nil)
		require.NoError(t, first.Start(ctx))
		require.NoError(t, first.Stop(ctx))
		second := b.newWorker(t, otherRoutes, defaultQueue, nil)
		require.NoError(t, second.Start(ctx))
		require.Equal(t, worker.StateWorking, second.State())
	})

	t.Run("AStoppedWaitingWorkerLeavesNoRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		started, release := make(chan string, 1), make(chan struct{})
		defer close(release)
		old := b.newWorker(t, holdRoutes, defaultQueue, b.holdRegistry(t, started, release))
		require.NoError(t, old.Start(ctx))
		b.ingest(t, "evt_held", "account.deposit")
		await(t, started, "the held handler to begin")
		w := b.newWorker(t, otherRoutes, defaultQueue, nil)
		require.NoError(t, w.Start(ctx))
		require.Equal(t, worker.StateWaiting, w.State())
		require.NoError(t, w.Stop(ctx))
		require.Equal(t, 1, b.records(t), "only the old worker's record is left")
	})

	t.Run("AnExpiredRecordDoesNotBlock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// What a worker killed with SIGKILL leaves once its record expired.
		_, err := b.db.Pool.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, host, pid, expires_at)
VALUES ('dead', 'default', 'bank * -> effect; unrouted -> done', 'gone', 1, now() - interval '1 second')`)
		require.NoError(t, err)
		w := b.newWorker(t, otherRoutes, defaultQueue, nil)
		require.NoError(t, w.Start(ctx))
		require.Equal(t, worker.StateWorking, w.State())
		require.Equal(t, 1, b.records(t), "the expired record was deleted")
	})

	t.Run("TheRecordIsRenewed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, func(c *worker.Config) { c.HeartbeatInterval = 20 * time.Millisecond })
		var first time.Time
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT expires_at FROM hookinbox_worker_routes`).Scan(&first))
		poll(t, 30*time.Second, "the record's renewal", func() (bool, error) {
			var now time.Time
			err := b.db.Pool.QueryRow(ctx, `SELECT expires_at FROM hookinbox_worker_routes`).Scan(&now)
			return now.After(first), err
		})
	})
}
