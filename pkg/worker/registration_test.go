package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/pkg/worker"
)

// otherRoutes settle bank's events with other handlers than routes do.
var otherRoutes = []worker.Route{{Source: "bank", Handlers: []string{"noop"}}}

// newWorker builds a worker on the bundle's database that the test starts.
func (b *testBundle) newWorker(t *testing.T, routes []worker.Route, queues map[string]int) *worker.Worker {
	t.Helper()
	w, err := worker.New(b.db.Pool, &worker.Config{
		Queues: queues, ReaperInterval: time.Hour, Routes: routes, Registry: b.registry(t),
		Sources: map[string]string{"bank": river.QueueDefault, "other": "other"}, Logger: zaptest.NewLogger(t),
	})
	require.NoError(t, err)
	return w
}

func (b *testBundle) records(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM hookinbox_worker_routes`).Scan(&n))
	return n
}

func TestWorkersSharingAQueueShareItsRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OtherRoutesOnASharedQueueAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)

		w := b.newWorker(t, otherRoutes, map[string]int{river.QueueDefault: 1})
		err := w.Start(ctx)
		var conflict *worker.RoutesConflictError
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, river.QueueDefault, conflict.Queue)
		require.Equal(t, "bank * -> noop; unrouted -> failed", conflict.Routes)
		require.Contains(t, conflict.TheirRoutes, "bank account.* -> effect; ")
		require.Contains(t, err.Error(), `worker.routes: a live worker (host `)
		require.Contains(t, err.Error(), `works queue "default" with other routes`)
		require.NoError(t, w.Stop(ctx), "Stop after a refused Start is harmless")
		require.Equal(t, 1, b.records(t), "the refused worker left no record")
	})

	t.Run("SameRoutesShareAQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		w := b.newWorker(t, routes, map[string]int{river.QueueDefault: 1})
		require.NoError(t, w.Start(ctx))
		require.Equal(t, 2, b.records(t))
		require.NoError(t, w.Stop(ctx))
		require.Equal(t, 1, b.records(t), "Stop deletes the worker's record")
	})

	t.Run("OtherRoutesOnOtherQueuesAreAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, nil)
		w := b.newWorker(t, []worker.Route{{Source: "other", Handlers: []string{"noop"}}}, map[string]int{"other": 1})
		require.NoError(t, w.Start(ctx))
		require.NoError(t, w.Stop(ctx))
	})

	t.Run("AStoppedWorkerMakesRoomForOtherRoutes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.newWorker(t, routes, map[string]int{river.QueueDefault: 1})
		require.NoError(t, first.Start(ctx))
		require.NoError(t, first.Stop(ctx))
		second := b.newWorker(t, otherRoutes, map[string]int{river.QueueDefault: 1})
		require.NoError(t, second.Start(ctx))
		require.NoError(t, second.Stop(ctx))
	})

	t.Run("AnExpiredRecordDoesNotBlock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// What a worker killed with SIGKILL leaves once its record expired.
		_, err := b.db.Pool.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, host, pid, expires_at)
VALUES ('dead', 'default', 'bank * -> effect; unrouted -> done', 'gone', 1, now() - interval '1 second')`)
		require.NoError(t, err)
		w := b.newWorker(t, otherRoutes, map[string]int{river.QueueDefault: 1})
		require.NoError(t, w.Start(ctx))
		require.Equal(t, 1, b.records(t), "the expired record was deleted")
		require.NoError(t, w.Stop(ctx))
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
