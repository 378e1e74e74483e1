package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestAnOlderWaitingSetNeverTakesOverFromANewerOneCutOff(t *testing.T) {
	t.Parallel()

	// Route set B waits, older than route set A, which works the queue (of
	// two waiting, the newer won). A is cut off from
	// hookinbox_worker_routes past its records' TTL. B must not take the
	// queue over: a route change never rolls back, and when A came back it
	// would find B working and retire, or (as the review of the soak's seed
	// 202 fix found) record itself waiting, newer than B, which then handed
	// over and retired beside A, and nobody worked the queue. A's expired
	// record blocks B; the events wait for A, which works them once it is
	// back, B still waiting. Every event is done once.
	ctx := context.Background()
	b := setup(t)
	poolA, role := b.rolePool(t, 16)
	// A's "hold" events run until release is closed: A drains while one
	// runs.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	start := func(pool *pgxpool.Pool, name string) *worker.Worker {
		return b.startDefaults(t, pool, func(c *worker.Config) {
			c.HeartbeatInterval = time.Second
			c.Registry.Register(name, func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, ev.EventID)
				return err
			})
			c.SoftStopTimeout = 2 * time.Second
			c.Registry.Register("hold_"+name, func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
				select {
				case entered <- struct{}{}:
				default: // run again (by B): not waited for
				}
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			c.Routes = []worker.Route{
				{Source: "bank", Types: []string{"hold"}, Handlers: []string{"hold_" + name}},
				{Source: "bank", Handlers: []string{name}},
			}
		})
	}
	// X, a third route set, works the queue while B and A start.
	_, err := b.db.Pool.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, state, host, pid, started_at, expires_at)
VALUES ('x', 'default', 'bank * -> x', 'working', 'x', 1, now() - interval '1 hour', now() + interval '1 hour')`)
	require.NoError(t, err)
	wb := start(b.db.Pool, "rec_b")
	require.Equal(t, worker.StateWaiting, wb.State())
	wa := start(poolA, "rec_a")
	require.Equal(t, worker.StateWaiting, wa.State())
	_, err = b.db.Pool.Exec(ctx, `DELETE FROM hookinbox_worker_routes WHERE worker_id = 'x'`)
	require.NoError(t, err)
	waitState(t, wa, worker.StateWorking)
	require.Equal(t, worker.StateWaiting, wb.State(), "the older waiting set took the queue")

	n := 0
	ingest := func(k int) {
		for range k {
			b.ingest(t, fmt.Sprintf("evt_%04d", n), "account.deposit")
			n++
		}
	}
	ingest(5)
	b.ingest(t, "hold", "hold")
	n++
	await(t, entered, "the held handler to begin")
	_, err = b.db.Pool.Exec(ctx, `REVOKE ALL ON hookinbox_worker_routes FROM `+role)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := b.db.Pool.Exec(context.Background(), `GRANT ALL ON hookinbox_worker_routes TO `+role)
		require.NoError(t, err)
	})
	// A's records expire; B claims every second meanwhile (its waiting
	// record's expiry moves on), and A's expired record blocks it.
	var expiredAt time.Time
	poll(t, 60*time.Second, "A's records to expire", func() (bool, error) {
		err := b.db.Pool.QueryRow(ctx, `SELECT max(expires_at) FROM hookinbox_worker_routes WHERE routes LIKE '%rec_a%' AND expires_at < now()`).Scan(&expiredAt)
		return err == nil, nil
	})
	cut := n
	ingest(5)
	poll(t, 60*time.Second, "two claims of B's after A's records expired", func() (bool, error) {
		var renewed time.Time
		err := b.db.Pool.QueryRow(ctx, `SELECT expires_at FROM hookinbox_worker_routes WHERE routes LIKE '%rec_b%'`).Scan(&renewed)
		// A claim sets expiry one TTL (3 s) ahead: this one came 2 s after.
		return err == nil && renewed.Sub(expiredAt) > 5*time.Second, err
	})
	require.Equal(t, worker.StateWaiting, wb.State(), "the older set took the queue over from the newer one")
	require.True(t, wa.Fenced())
	var worked int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE event_id >= $1 AND event_id < $2 AND status = 'done'`,
		fmt.Sprintf("evt_%04d", cut), fmt.Sprintf("evt_%04d", cut+5)).Scan(&worked))
	require.Zero(t, worked, "events were worked while the newer set was cut off")

	_, err = b.db.Pool.Exec(ctx, `GRANT ALL ON hookinbox_worker_routes TO `+role)
	require.NoError(t, err)
	// A's hold event, begun before the cut, commits once released: nobody
	// else worked the queue meanwhile.
	poll(t, 60*time.Second, "A to work again", func() (bool, error) { return !wa.Fenced(), nil })
	releaseOnce()
	ingest(10)
	poll(t, 30*time.Second, "every event to be done", func() (bool, error) {
		c, err := b.store.Count(ctx, nil)
		return err == nil && c.Done == int64(n), err
	})
	require.Equal(t, worker.StateWorking, wa.State())
	require.Equal(t, worker.StateWaiting, wb.State())
	var runs, distinct int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id) FROM effects`).Scan(&runs, &distinct))
	require.Equal(t, distinct, runs, "an event applied twice")
}
