package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
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
		w, entered, release := startGated(t, b,
			map[string]worker.Handler{"boom": func(context.Context, pgx.Tx, inbox.Event) error { return errors.New("boom") }},
			worker.Route{Source: "*", Types: []string{"boom"}, Handlers: []string{"tx_effect", "boom"}})
		b.ingest(t, "evt_gate", "gate")
		await(t, entered, "the held handler to begin")
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

	// Each way a handler can reach the transaction (Exec with and without
	// arguments, Query, QueryRow, a batch, COPY, a nested transaction, the
	// connection itself) makes its event's savepoint first, so a failing
	// event's writes roll back alone, whichever way they were made; and a
	// handler cannot end the group's transaction.
	t.Run("WritesOfAFailingEventRollBackWhicheverWayTheyWereMade", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		const insert = `INSERT INTO tx_effects VALUES ($1, txid_current())`
		failAfter := func(write func(ctx context.Context, tx pgx.Tx, id string) error) worker.Handler {
			return func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				if err := write(ctx, tx, ev.EventID); err != nil {
					return err
				}
				return errors.New("boom after a write")
			}
		}
		bad := map[string]worker.Handler{
			"exec_args": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				_, err := tx.Exec(ctx, insert, id)
				return err
			}),
			"exec_simple": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO tx_effects VALUES ('%s', txid_current()); INSERT INTO tx_effects VALUES ('%s', 0)`, id, id))
				return err
			}),
			// The statement after the write fails: the savepoint, made in
			// the same round trip, still undoes the write.
			"exec_simple_sql_error": func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO tx_effects VALUES ('%s', txid_current()); SELECT 1/0`, ev.EventID))
				return err
			},
			"query_row": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				var n int
				return tx.QueryRow(ctx, insert+` RETURNING 1`, id).Scan(&n)
			}),
			"query": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				rows, err := tx.Query(ctx, insert+` RETURNING 1`, id)
				if err != nil {
					return err
				}
				rows.Close()
				return rows.Err()
			}),
			"batch": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				batch := &pgx.Batch{}
				batch.Queue(insert, id)
				return tx.SendBatch(ctx, batch).Close()
			}),
			"copy": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{"tx_effects"}, []string{"event_id", "txid"}, pgx.CopyFromRows([][]any{{id, int64(0)}}))
				return err
			}),
			"nested": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				return pgx.BeginFunc(ctx, tx, func(nested pgx.Tx) error {
					_, err := nested.Exec(ctx, insert, id)
					return err
				})
			}),
			"conn": failAfter(func(ctx context.Context, tx pgx.Tx, id string) error {
				_, err := tx.Conn().Exec(ctx, insert, id)
				return err
			}),
			// Ending the group's transaction is refused: the write stays the
			// event's, and rolls back with it.
			"commit": func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
				if _, err := tx.Exec(ctx, insert, ev.EventID); err != nil {
					return err
				}
				return tx.Commit(ctx)
			},
			"no_statement": failAfter(func(context.Context, pgx.Tx, string) error { return nil }),
		}
		var routes []worker.Route
		for name := range bad {
			routes = append(routes, worker.Route{Source: "*", Types: []string{name}, Handlers: []string{name}})
		}
		w, entered, release := startGated(t, b, bad, routes...)
		b.ingest(t, "evt_gate", "gate")
		await(t, entered, "the held handler to begin")
		// Good and failing events alternate in one group: each good one
		// writes after a failing one's rollback.
		var good, failing []int64
		for name := range bad {
			failing = append(failing, b.ingest(t, "evt_bad_"+name, name))
			good = append(good, b.ingest(t, "evt_good_"+name, "account.deposit"))
		}
		require.Eventually(t, func() bool { return w.QueuedForGroup() == len(good)+len(failing) }, 30*time.Second, 5*time.Millisecond)
		close(release)

		for _, id := range failing {
			b.waitStatus(t, id, inbox.StatusFailed)
		}
		for _, id := range good {
			require.Equal(t, 1, b.waitStatus(t, id, inbox.StatusDone).Attempts)
		}
		var goodEffects, txids, badEffects int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE event_id LIKE 'evt\_good\_%'), count(DISTINCT txid) FILTER (WHERE event_id LIKE 'evt\_good\_%'),
       count(*) FILTER (WHERE event_id LIKE 'evt\_bad\_%')
FROM tx_effects`).Scan(&goodEffects, &txids, &badEffects))
		require.Equal(t, len(good), goodEffects)
		require.Equal(t, 1, txids, "the group's good events committed in one transaction")
		require.Zero(t, badEffects, "no failing event's write survived")
		var commitErr string
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT last_error FROM webhook_inbox WHERE event_id = 'evt_bad_commit'`).Scan(&commitErr))
		require.Contains(t, commitErr, "must not commit")
	})

	// A group waits only briefly for a row another transaction holds: the
	// event that meets the lock and those after it are worked alone, and
	// the events before it commit without waiting for the lock's holder.
	t.Run("EventWaitingOnAHeldRowEndsTheGroupAndIsWorkedAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		_, err := b.db.Pool.Exec(ctx, `CREATE TABLE hot (id int PRIMARY KEY, n int NOT NULL); INSERT INTO hot VALUES (1, 0)`)
		require.NoError(t, err)
		w, entered, release := startGated(t, b,
			map[string]worker.Handler{"hot": func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
				_, err := tx.Exec(ctx, `UPDATE hot SET n = n + 1 WHERE id = 1`)
				return err
			}},
			worker.Route{Source: "*", Types: []string{"hot"}, Handlers: []string{"tx_effect", "hot"}})
		// Another transaction holds the hot row until the end of the test's
		// checks.
		holder, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer holder.Rollback(ctx) // Released explicitly below; this is for a failed test.
		_, err = holder.Exec(ctx, `SELECT 1 FROM hot WHERE id = 1 FOR UPDATE`)
		require.NoError(t, err)

		b.ingest(t, "evt_gate", "gate")
		await(t, entered, "the held handler to begin")
		const n, hot = 10, 3
		ids := make([]int64, n)
		for i := range n {
			typ := "account.deposit"
			if i == hot {
				typ = "hot"
			}
			ids[i] = b.ingest(t, fmt.Sprintf("evt_%02d", i), typ)
		}
		require.Eventually(t, func() bool { return w.QueuedForGroup() == n }, 30*time.Second, 5*time.Millisecond)
		close(release)

		// Every event but the hot one is done while the row is still held:
		// nothing waited for the holder.
		for i, id := range ids {
			if i != hot {
				require.Equal(t, 1, b.waitStatus(t, id, inbox.StatusDone).Attempts)
			}
		}
		require.Equal(t, inbox.StatusPending, b.row(t, ids[hot]).Status, "the hot event cannot be done while its row is held")
		require.NoError(t, holder.Rollback(ctx))
		require.Equal(t, 1, b.waitStatus(t, ids[hot], inbox.StatusDone).Attempts)

		var hotN int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT n FROM hot WHERE id = 1`).Scan(&hotN))
		require.Equal(t, 1, hotN)
		var effects, distinct, groupTxids int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*), count(DISTINCT event_id),
       count(DISTINCT txid) FILTER (WHERE event_id IN ('evt_00', 'evt_01', 'evt_02'))
FROM tx_effects`).Scan(&effects, &distinct, &groupTxids))
		require.Equal(t, n, effects, "each event's effect once, the hot one's rolled back in the group")
		require.Equal(t, n, distinct)
		require.Equal(t, 1, groupTxids, "the events before the hot one committed in one transaction")
		for _, id := range ids {
			require.Equal(t, "completed", b.jobState(t, id))
		}
	})

	// Groups take the sources' jobs in turns: an event of a quiet source,
	// on a queue of its own, fetched behind a storm's queued jobs, is in
	// the next group, not behind all of them.
	t.Run("AQuietSourcesEventIsInTheNextGroupBehindAStorm", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		const groupMax, stormEvents = 5, 40
		w, entered, release := startGatedWith(t, b, func(c *worker.Config) {
			c.Queues = map[string]int{river.QueueDefault: 8, "storm": 2 * stormEvents}
			c.Sources = map[string]string{"bank": river.QueueDefault, "storm": "storm"}
			c.GroupMaxEvents = groupMax
		}, nil)
		// It ingests the storm source's deliveries only.
		storm := inboxstore.NewIngester(b.db.Pool, b.client, &inboxstore.IngesterConfig{
			QueueFor: func(string) string { return "storm" },
		})
		b.ingest(t, "evt_gate", "gate")
		await(t, entered, "the held handler to begin")
		for i := range stormEvents {
			d := delivery(fmt.Sprintf("evt_storm_%02d", i), "account.deposit")
			d.Source = "storm"
			_, err := storm.Ingest(ctx, d)
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return w.QueuedForGroup() == stormEvents }, 30*time.Second, 5*time.Millisecond)
		quiet := b.ingest(t, "evt_quiet", "account.deposit")
		require.Eventually(t, func() bool { return w.QueuedForGroup() == stormEvents+1 }, 30*time.Second, 5*time.Millisecond)
		close(release)

		b.waitStatus(t, quiet, inbox.StatusDone)
		// The only flusher works one group at a time, and each group's
		// transaction id is above the one before it.
		var quietGroup, stormBefore int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT (SELECT count(DISTINCT txid) FROM tx_effects WHERE txid <= q.txid),
       (SELECT count(*) FROM tx_effects WHERE txid < q.txid)
FROM tx_effects AS q WHERE q.event_id = 'evt_quiet'`).Scan(&quietGroup, &stormBefore))
		require.Equal(t, 1, quietGroup, "the quiet event is in the first group after the gate")
		require.Zero(t, stormBefore)
	})
}

// startGated starts a worker with group commit whose only flusher can be
// held: an event of type "gate" blocks in its handler, closing entered, until
// release is closed, so that the events ingested meanwhile queue up as the
// next group. The tx_effect handler records each event's transaction id in
// tx_effects, which it creates, for every event no earlier route matches.
// handlers and routes come between the two.
func startGated(t *testing.T, b *testBundle, handlers map[string]worker.Handler, routes ...worker.Route) (w *worker.Worker, entered <-chan struct{}, release chan<- struct{}) {
	t.Helper()
	return startGatedWith(t, b, nil, handlers, routes...)
}

// startGatedWith is startGated with mutate applied to the worker's Config
// last.
func startGatedWith(t *testing.T, b *testBundle, mutate func(*worker.Config), handlers map[string]worker.Handler,
	routes ...worker.Route,
) (w *worker.Worker, entered <-chan struct{}, release chan<- struct{}) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `CREATE TABLE tx_effects (event_id text NOT NULL, txid bigint NOT NULL)`)
	require.NoError(t, err)
	in, out := make(chan struct{}), make(chan struct{})
	w = b.start(t, func(c *worker.Config) {
		c.Queues = map[string]int{river.QueueDefault: 32}
		c.GroupMaxEvents = worker.GroupMaxEventsAdvised
		c.GroupFlushers = 1 // the gate holds the only flusher
		var entered sync.Once
		c.Registry.Register("gate", func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
			entered.Do(func() { close(in) })
			select {
			case <-out:
				return nil
			case <-ctx.Done(): // a test that failed before it released the gate
				return ctx.Err()
			}
		})
		c.Registry.Register("tx_effect", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO tx_effects VALUES ($1, txid_current())`, ev.EventID)
			return err
		})
		for name, h := range handlers {
			c.Registry.Register(name, h)
		}
		c.Routes = append([]worker.Route{{Source: "*", Types: []string{"gate"}, Handlers: []string{"gate"}}}, routes...)
		c.Routes = append(c.Routes, worker.Route{Source: "*", Handlers: []string{"tx_effect"}})
		if mutate != nil {
			mutate(c)
		}
	})
	return w, in, out
}
