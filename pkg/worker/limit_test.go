package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestTransactionLimit(t *testing.T) {
	t.Parallel()

	// River runs 200 jobs at once, but PostgreSQL sees no more of the
	// worker's group transactions at once than the limiter allows (at most
	// the flushers, and it starts at 1): the jobs wait for a permit without
	// a connection, and their events share the transactions that run.
	t.Run("PostgreSQLSeesNoMoreGroupTransactionsThanTheLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		_, err := b.db.Pool.Exec(ctx, `CREATE TABLE tx_effects (event_id text NOT NULL, txid bigint NOT NULL)`)
		require.NoError(t, err)
		const n, flushers = 300, 3
		ids := make([]int64, n)
		for i := range n {
			ids[i] = b.ingest(t, fmt.Sprintf("evt_%03d", i), "account.deposit")
		}
		var (
			mu       sync.Mutex
			seen     []int // group transactions open, as each handler saw them
			overflow []string
		)
		var w *worker.Worker
		w = b.start(t, func(c *worker.Config) {
			c.Queues = map[string]int{river.QueueDefault: 200}
			c.GroupFlushers = flushers
			// The product's job_timeout: a group's events get a tenth of
			// it before they leave it to run again alone (the test's 10 s
			// would give 1 s, which a loaded machine's probe can pass).
			c.JobTimeout = worker.JobTimeoutDefault
			c.Registry.Register("probe", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				// Every open group transaction has taken rows of the
				// inbox: it holds a row-exclusive lock on the table and
				// a transaction id (a statement that changed no row, as
				// the reaper's may, has none).
				var open int
				if err := tx.QueryRow(ctx, `
SELECT count(DISTINCT l.pid) FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.relation = 'webhook_inbox'::regclass AND l.mode = 'RowExclusiveLock' AND l.granted
  AND a.backend_xid IS NOT NULL`).Scan(&open); err != nil {
					return err
				}
				limit, inUse := w.TransactionLimit()
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, open)
				if open > flushers || limit > flushers || inUse > flushers {
					overflow = append(overflow, fmt.Sprintf("%s: %d open, limit %d, %d permits out", ev.EventID, open, limit, inUse))
				}
				_, err := tx.Exec(ctx, `INSERT INTO tx_effects VALUES ($1, txid_current())`, ev.EventID)
				return err
			})
			c.Routes = []worker.Route{{Source: "*", Handlers: []string{"probe"}}}
		})
		for _, id := range ids {
			b.waitStatus(t, id, inbox.StatusDone)
		}
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, overflow)
		require.Len(t, seen, n)
		require.Equal(t, 1, seen[0], "the limit starts at 1")
		var txids int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(DISTINCT txid) FROM tx_effects`).Scan(&txids))
		require.Less(t, txids, n/2, "events waiting for a permit share the transactions that run")
		limit, _ := w.TransactionLimit()
		require.GreaterOrEqual(t, limit, 1)
		// Once idle, every permit is back with a waiting flusher or free.
		poll(t, 10*time.Second, "the permits to be back", func() (bool, error) {
			_, inUse := w.TransactionLimit()
			return inUse <= limit, nil
		})
	})
}
