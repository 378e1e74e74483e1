package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestAWorkerOfAnotherQueueDoesNotLetAnOlderSetTakeOver(t *testing.T) {
	t.Parallel()

	// TestAnOlderWaitingSetNeverTakesOverFromANewerOneCutOff, in an
	// installation with a second queue: while route set A (newer, working)
	// is cut off, a worker of the other queue starts. Its claim must not
	// delete A's mark on the first queue: else B, the older set, takes the
	// queue over while A is cut off, and settles the event only A routes
	// as unrouted (failed), and A, back, retires: the rollout went
	// backwards.
	ctx := context.Background()
	b := setup(t)
	poolA, role := b.rolePool(t, 16)
	start := func(pool *pgxpool.Pool, name string, routes []worker.Route) *worker.Worker {
		return b.startDefaults(t, pool, func(c *worker.Config) {
			c.HeartbeatInterval = time.Second
			c.Registry.Register(name, func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, ev.EventID)
				return err
			})
			c.Routes = routes
		})
	}
	_, err := b.db.Pool.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, state, host, pid, started_at, expires_at)
VALUES ('x', 'default', 'bank * -> x', 'working', 'x', 1, now() - interval '1 hour', now() + interval '1 hour')`)
	require.NoError(t, err)
	// B, the older set, routes deposits; A, the newer, every event.
	wb := start(b.db.Pool, "rec_b", []worker.Route{{Source: "bank", Types: []string{"account.deposit"}, Handlers: []string{"rec_b"}}})
	require.Equal(t, worker.StateWaiting, wb.State())
	wa := start(poolA, "rec_a", []worker.Route{{Source: "bank", Handlers: []string{"rec_a"}}})
	require.Equal(t, worker.StateWaiting, wa.State())
	_, err = b.db.Pool.Exec(ctx, `DELETE FROM hookinbox_worker_routes WHERE worker_id = 'x'`)
	require.NoError(t, err)
	waitState(t, wa, worker.StateWorking)
	require.Equal(t, worker.StateWaiting, wb.State())

	_, err = b.db.Pool.Exec(ctx, `REVOKE ALL ON hookinbox_worker_routes FROM `+role)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := b.db.Pool.Exec(context.Background(), `GRANT ALL ON hookinbox_worker_routes TO `+role)
		require.NoError(t, err)
	})
	poll(t, 60*time.Second, "A's records to expire", func() (bool, error) {
		var expired bool
		err := b.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hookinbox_worker_routes WHERE routes LIKE '%rec_a%' AND expires_at < now())`).Scan(&expired)
		return expired, err
	})
	// A worker of the other queue starts.
	b.startDefaults(t, b.db.Pool, func(c *worker.Config) {
		c.HeartbeatInterval = time.Second
		c.Sources = map[string]string{"shop": "slow"}
		c.Queues = map[string]int{"slow": 1}
		c.Routes = []worker.Route{{Source: "shop", Handlers: []string{"effect"}}}
	})
	refund := b.ingest(t, "refund", "account.refund")
	var started time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT now()`).Scan(&started))
	// A claim sets B's expiry one TTL (3 s) ahead: this one came more than
	// a second after the other queue's worker started.
	poll(t, 60*time.Second, "a claim of B's a second after the other queue's worker started", func() (bool, error) {
		var expires time.Time
		err := b.db.Pool.QueryRow(ctx, `SELECT expires_at FROM hookinbox_worker_routes WHERE routes LIKE '%rec_b%'`).Scan(&expires)
		return err == nil && expires.Sub(started) > 4100*time.Millisecond || wb.State() == worker.StateWorking, err
	})
	require.Equal(t, worker.StateWaiting, wb.State(), "the older set took the queue over from the newer one cut off")
	var status string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT status FROM webhook_inbox WHERE id = $1`, refund).Scan(&status))
	require.Equal(t, "pending", status, "the older set settled an event only the newer set routes")

	// A, back, works the event; B still waits.
	_, err = b.db.Pool.Exec(ctx, `GRANT ALL ON hookinbox_worker_routes TO `+role)
	require.NoError(t, err)
	b.waitStatus(t, refund, inbox.StatusDone)
	require.Equal(t, worker.StateWorking, wa.State())
	require.Equal(t, worker.StateWaiting, wb.State())
}
