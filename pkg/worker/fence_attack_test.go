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

func TestAnOlderWaitingSetThatTookOverIsNotRetiredByTheWorkerItReplaced(t *testing.T) {
	t.Parallel()
	for name, stop := range map[string]bool{"Retires": false, "StoppedWhileItDrains": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			olderWaitingSetTakesOver(t, stop)
		})
	}
}

// olderWaitingSetTakesOver drives TestAnOlderWaitingSetThatTookOverIsNot
// RetiredByTheWorkerItReplaced; stop stops A while it drains.
func olderWaitingSetTakesOver(t *testing.T, stop bool) {

	// Route set B waits, older than route set A, which works the queue (of
	// two waiting, the newer won). A is cut off from
	// hookinbox_worker_routes past its records' ttl: B takes the queue
	// over. When A reaches the table again it claims, finds B working, and
	// is recorded waiting, with its start, newer than B's: B must not take
	// that record for a newer route set that waits for it, or B drains and
	// retires while A drains and retires too, and nobody works the queue.
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
	<-entered
	_, err = b.db.Pool.Exec(ctx, `REVOKE ALL ON hookinbox_worker_routes FROM `+role)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := b.db.Pool.Exec(context.Background(), `GRANT ALL ON hookinbox_worker_routes TO `+role)
		require.NoError(t, err)
	})
	waitState(t, wb, worker.StateWorking)
	require.True(t, wa.Fenced())
	ingest(5)
	_, err = b.db.Pool.Exec(ctx, `GRANT ALL ON hookinbox_worker_routes TO `+role)
	require.NoError(t, err)
	waitState(t, wa, worker.StateDraining)
	// A's drain waits for its hold event, its waiting record renewed:
	// some polls of B's pass meanwhile.
	time.Sleep(3 * time.Second)
	if stop {
		// Stop waits for the drain (its soft stop, then its hard stop
		// cancels the hold event).
		require.NoError(t, wa.Stop(context.Background()))
		require.Equal(t, worker.StateStopped, wa.State())
		releaseOnce()
	} else {
		releaseOnce()
		waitState(t, wa, worker.StateRetired)
	}
	ingest(10)
	poll(t, 30*time.Second, "every event to be done", func() (bool, error) {
		c, err := b.store.Count(ctx, nil)
		if err != nil || c.Done == int64(n) {
			return err == nil, err
		}
		if wa.State() != worker.StateWorking && wb.State() != worker.StateWorking {
			return false, fmt.Errorf("%d of %d events done and no worker works the queue: A %s, B %s",
				c.Done, n, wa.State(), wb.State())
		}
		return false, nil
	})
	require.Equal(t, worker.StateWorking, wb.State())
}
