package worker_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// ingestPayload claims one event of source bank with payload.
func (b *testBundle) ingestPayload(t *testing.T, eventID, eventType string, payload any) int64 {
	t.Helper()
	raw, err := json.Marshal(payload)
	require.NoError(t, err)
	res, err := b.ingester.Ingest(context.Background(), &inboxstore.Delivery{
		Source: "bank", Provider: "standardwebhooks", Body: raw,
		Events: []inboxstore.IncomingEvent{{ID: eventID, Type: eventType, Payload: raw}},
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.New)
	return res.Claimed[0].ID
}

// jobRow reads the River job of the inbox row id: its state, attempt and
// snooze count.
func (b *testBundle) jobRow(t *testing.T, id int64) (state string, attempt, snoozes int) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
SELECT j.state::text, j.attempt, coalesce((j.metadata->>'snoozes')::int, 0)
FROM river_job AS j WHERE j.kind = $1 AND (j.args->>'inbox_id')::bigint = $2`, inboxstore.JobKind, id).Scan(&state, &attempt, &snoozes))
	return state, attempt, snoozes
}

func TestRouteOptions(t *testing.T) {
	t.Parallel()

	// The handler's first run reads under SERIALIZABLE, then a concurrent
	// transaction updates the row it is about to update: its UPDATE fails
	// with 40001. The worker runs the transaction again at once, which
	// succeeds; the event spends one attempt, and River's job one.
	t.Run("SerializationConflictIsRetriedToSuccess", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		_, err := b.db.Pool.Exec(ctx, `CREATE TABLE counter (n int NOT NULL); INSERT INTO counter VALUES (0)`)
		require.NoError(t, err)
		var runs atomic.Int32
		read, proceed := make(chan struct{}), make(chan struct{})
		reg := b.registry(t)
		reg.Register("bump", func(ctx context.Context, tx pgx.Tx, _ inbox.Event) error {
			var n int
			if err := tx.QueryRow(ctx, `SELECT n FROM counter`).Scan(&n); err != nil {
				return err
			}
			if runs.Add(1) == 1 {
				select {
				case read <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				select {
				case <-proceed:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			_, err := tx.Exec(ctx, `UPDATE counter SET n = $1 + 1`, n)
			return err
		})
		b.start(t, func(c *worker.Config) {
			c.Registry = reg
			c.Routes = []worker.Route{{Source: "bank", Types: []string{"bump"}, Handlers: []string{"bump"}, Isolation: worker.IsolationSerializable}}
		})
		id := b.ingest(t, "evt_bump", "bump")
		await(t, read, "the held handler to begin")
		_, err = b.db.Pool.Exec(ctx, `UPDATE counter SET n = n + 10`)
		require.NoError(t, err)
		close(proceed)
		r := b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 1, r.Attempts, "the conflict spent no attempt")
		require.EqualValues(t, 2, runs.Load())
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT n FROM counter`).Scan(&n))
		require.Equal(t, 11, n, "the retry read the concurrent update")
		require.Equal(t, "completed", b.jobState(t, id))
		_, attempt, _ := b.jobRow(t, id)
		require.Equal(t, 1, attempt)
	})

	// With the lock another transaction holds, the event is snoozed, again
	// and again, without running and without spending attempts; once the
	// lock is released, it runs once.
	t.Run("AdvisoryLockBusyIsSnoozed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		b.start(t, func(c *worker.Config) {
			c.Routes = []worker.Route{{Source: "bank", Types: []string{"heavy"}, Handlers: []string{"effect"},
				Lock: &worker.LockOption{Key: "data.account", Snooze: 20 * time.Millisecond}}}
		})
		holder, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = holder.Rollback(ctx) }()
		_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, worker.AdvisoryKey("bank", "acct_1"))
		require.NoError(t, err)

		id := b.ingestPayload(t, "evt_heavy", "heavy", map[string]any{"data": map[string]any{"account": "acct_1"}})
		poll(t, 30*time.Second, "the job to be snoozed twice", func() (bool, error) {
			_, _, snoozes := b.jobRow(t, id)
			return snoozes >= 2, nil
		})
		r := b.row(t, id)
		require.Equal(t, inbox.StatusPending, r.Status)
		require.Zero(t, r.Attempts)
		require.Zero(t, b.effects(t, "evt_heavy"))

		require.NoError(t, holder.Commit(ctx))
		r = b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, 1, b.effects(t, "evt_heavy"))
		require.Equal(t, "completed", b.jobState(t, id))
		_, attempt, _ := b.jobRow(t, id)
		require.Equal(t, 1, attempt, "snoozes are not attempts")
	})

	t.Run("LockKeyMissingFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t, func(c *worker.Config) {
			c.Routes = []worker.Route{{Source: "bank", Types: []string{"heavy"}, Handlers: []string{"effect"},
				Lock: &worker.LockOption{Key: "data.account"}}}
		})
		id := b.ingestPayload(t, "evt_nokey", "heavy", map[string]any{"data": map[string]any{}})
		r := b.waitStatus(t, id, inbox.StatusFailed)
		require.Contains(t, r.LastError, "lock key (data.account)")
	})

	t.Run("BadOptionsAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, c := range []struct {
			route worker.Route
			want  string
		}{
			{worker.Route{Source: "bank", Handlers: []string{"noop"}, Isolation: "snapshot"}, `unknown isolation "snapshot"`},
			{worker.Route{Source: "bank", Handlers: []string{"noop"}, Lock: &worker.LockOption{}}, "lock.key: required"},
			{worker.Route{Source: "bank", Handlers: []string{"noop"}, Sequence: &worker.SequenceOption{Key: "data.*"}}, "sequence.key"},
			{worker.Route{Source: "bank", Handlers: []string{"noop"}, Sequence: &worker.SequenceOption{Key: "data.k"}}, "sequence.order: required"},
			{worker.Route{Source: "bank", Handlers: []string{"noop"}, Isolation: worker.IsolationSerializable,
				Sequence: &worker.SequenceOption{Key: "data.k", Order: "data.v"}}, "sequence: needs isolation read_committed"},
		} {
			_, err := worker.New(b.db.Pool, &worker.Config{Routes: []worker.Route{c.route}, Sources: sources})
			require.ErrorContains(t, err, c.want, "%+v", c.route)
		}
	})
}
