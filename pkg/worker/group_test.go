package worker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestGroupCommit(t *testing.T) {
	t.Parallel()

	// The events of one group share a transaction; a failing one rolls
	// back alone (its savepoint), is recorded and retried alone, and the
	// others commit.
	t.Run("FailingEventRollsBackAloneAndTheOthersCommitTogether", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		_, err := b.db.Pool.Exec(ctx, `CREATE TABLE tx_effects (event_id text NOT NULL, txid bigint NOT NULL)`)
		require.NoError(t, err)
		entered, release := make(chan struct{}), make(chan struct{})
		w := b.start(t, func(c *worker.Config) {
			c.Queues = map[string]int{river.QueueDefault: 32}
			c.GroupFlushers = 1 // the gate holds the only flusher
			c.Registry.Register("gate", func(context.Context, pgx.Tx, inbox.Event) error {
				close(entered)
				<-release
				return nil
			})
			c.Registry.Register("tx_effect", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				_, err := tx.Exec(ctx, `INSERT INTO tx_effects VALUES ($1, txid_current())`, ev.EventID)
				return err
			})
			c.Registry.Register("boom", func(context.Context, pgx.Tx, inbox.Event) error { return errors.New("boom") })
			c.Routes = []worker.Route{
				{Source: "*", Types: []string{"gate"}, Handlers: []string{"gate"}},
				{Source: "*", Types: []string{"boom"}, Handlers: []string{"tx_effect", "boom"}},
				{Source: "*", Handlers: []string{"tx_effect"}},
			}
		})
		b.ingest(t, "evt_gate", "gate")
		<-entered
		// While the only flusher waits in the gate, ten events queue up
		// behind it: they are the next group.
		const n = 10
		ids := make([]int64, n)
		for i := range n {
			typ := "account.deposit"
			if i == n/2 {
				typ = "boom"
			}
			ids[i] = b.ingest(t, fmt.Sprintf("evt_%02d", i), typ)
		}
		require.Eventually(t, func() bool { return w.QueuedForGroup() == n }, 30*time.Second, 5*time.Millisecond)
		close(release)

		bad := b.waitStatus(t, ids[n/2], inbox.StatusFailed)
		require.Equal(t, 3, bad.Attempts)
		require.Equal(t, "boom", bad.LastError)
		for i, id := range ids {
			if i != n/2 {
				require.Equal(t, 1, b.waitStatus(t, id, inbox.StatusDone).Attempts)
			}
		}
		var effects, txids, boomEffects int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE event_id <> 'evt_05'), count(DISTINCT txid) FILTER (WHERE event_id <> 'evt_05'),
       count(*) FILTER (WHERE event_id = 'evt_05')
FROM tx_effects`).Scan(&effects, &txids, &boomEffects))
		require.Equal(t, n-1, effects)
		require.Equal(t, 1, txids, "the group's events committed in one transaction")
		require.Zero(t, boomEffects)
		for i, id := range ids {
			want := "completed"
			if i == n/2 {
				want = "discarded"
			}
			require.Equal(t, want, b.jobState(t, id))
		}
	})
}
