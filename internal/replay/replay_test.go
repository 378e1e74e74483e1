package replay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/replay"
	"github.com/hookinbox/hookinbox/internal/testkit/bulkload"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

type testBundle struct {
	db      *dbtest.DB
	store   *inboxstore.Store
	manager *replay.Manager
	// broken makes the "effect" handler fail for events of type "broken".
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(context.Background(), `CREATE TABLE effects (event_id text NOT NULL)`)
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	manager, err := replay.NewManager(db.Pool, client, &replay.Config{Pace: replay.Pace{Rate: 1_000_000}})
	require.NoError(t, err)
	return &testBundle{db: db, store: inboxstore.New(db.Pool), manager: manager}
}

// start runs a worker whose "effect" handler records each run of an
// event's handlers in effects, in the event's transaction.
func (b *testBundle) start(t *testing.T) {
	t.Helper()
	registry := worker.NewRegistry(zaptest.NewLogger(t))
	registry.Register("effect", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		if ev.EventType == "broken" {
			return errors.New("handler bug: cannot parse amount")
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, ev.EventID)
		return err
	})
	w, err := worker.New(b.db.Pool, &worker.Config{
		Queues:         map[string]int{river.QueueDefault: 16},
		MaxAttempts:    1,
		JobTimeout:     10 * time.Second,
		ReaperInterval: time.Hour,
		Routes:         []worker.Route{{Source: "bank", Types: []string{"*"}, Handlers: []string{"effect"}}},
		Sources:        map[string]string{"bank": river.QueueDefault},
		Registry:       registry,
		Logger:         zaptest.NewLogger(t),
		RiverConfig: func(rc *river.Config) {
			rc.FetchCooldown = 5 * time.Millisecond
			rc.FetchPollInterval = 20 * time.Millisecond
		},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
}

// load writes n rows of source bank, events evt_0 … evt_<n-1>, in status,
// as a worker would have left them, and returns the first id.
func (b *testBundle) load(t *testing.T, n int, status inbox.Status, eventType string) int64 {
	t.Helper()
	ctx := context.Background()
	first, err := bulkload.ReserveIDs(ctx, b.db.Pool, n)
	require.NoError(t, err)
	received := time.Now().Add(-time.Hour)
	require.NoError(t, bulkload.Load(ctx, b.db.Pool, n, func(i int) (*bulkload.Row, error) {
		return &bulkload.Row{
			ID: first + int64(i), Status: status, Attempts: 1, ReceivedAt: received, ProcessedAt: received,
			Delivery: &inboxstore.Delivery{
				Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
				Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("evt_%d", i), Type: eventType, Payload: []byte(`{}`)}},
			},
		}, nil
	}))
	return first
}

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

func (b *testBundle) scalar(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// waitSettled waits until no row is pending and effects holds want rows.
func (b *testBundle) waitSettled(t *testing.T, want int64) {
	t.Helper()
	poll(t, 2*time.Minute, fmt.Sprintf("%d effects and no pending row", want), func() (bool, error) {
		return b.scalar(t, `SELECT count(*) FROM effects`) == want &&
			b.scalar(t, `SELECT count(*) FROM webhook_inbox WHERE status <> 'done'`) == 0, nil
	})
}

// waitJobFinished waits until River's job id is no longer running or
// waiting to run.
func (b *testBundle) waitJobFinished(t *testing.T, id int64) {
	t.Helper()
	poll(t, time.Minute, fmt.Sprintf("job %d to finish", id), func() (bool, error) {
		return b.scalar(t, `SELECT count(*) FROM river_job WHERE id = $1 AND state IN ('completed', 'cancelled', 'discarded')`, id) == 1, nil
	})
}

func TestBulkReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CancelledHalfwayResumedEveryRowProcessedOnceMore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const n, batch = 10_000, 500
		first := b.load(t, n, inbox.StatusDone, "account.deposit")
		sel := inboxstore.Selection{Source: "bank", Statuses: []inbox.Status{inbox.StatusDone}}
		count, err := b.manager.DryRun(ctx, &sel)
		require.NoError(t, err)
		require.EqualValues(t, n, count)
		require.Zero(t, b.scalar(t, `SELECT count(*) FROM webhook_inbox WHERE status <> 'done'`), "a dry run touches nothing")
		b.start(t)

		// The 5,001st row is held, so the run's eleventh batch waits on it:
		// the run is cancelled while that batch is in flight.
		hold, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = hold.Exec(ctx, `SELECT 1 FROM webhook_inbox WHERE id = $1 FOR UPDATE`, first+n/2)
		require.NoError(t, err)
		run, err := b.manager.Start(ctx, &replay.StartParams{Selection: sel, Batch: batch})
		require.NoError(t, err)
		require.EqualValues(t, n, run.Total)
		// The signal is the replay's own statement blocked by the session
		// that holds the row: other sessions wait on locks now and then too
		// (NOTIFY's commit lock, a relation's extension lock).
		var holder int
		require.NoError(t, hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder))
		poll(t, time.Minute, "the replay's batch to wait on the held row", func() (bool, error) {
			return b.scalar(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
AND query LIKE '%WITH picked AS%' AND $1 = ANY(pg_blocking_pids(pid))`, holder) == 1, nil
		})
		cancelled, err := b.manager.Cancel(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, replay.StateCancelled, cancelled.State)
		require.NoError(t, hold.Rollback(ctx))
		b.waitJobFinished(t, *cancelled.JobID)

		got, err := b.manager.Get(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, replay.StateCancelled, got.State)
		require.EqualValues(t, n/2, got.Replayed, "the batch in flight at the cancel is rolled back")
		require.Equal(t, first+n/2-1, got.CursorID)
		_, err = b.manager.Cancel(ctx, run.ID)
		require.ErrorIs(t, err, replay.ErrNotRunning)
		b.waitSettled(t, n/2)
		require.Zero(t, b.scalar(t, `SELECT count(*) FROM effects WHERE event_id = $1`, fmt.Sprintf("evt_%d", n/2)))

		resumed, err := b.manager.Resume(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, replay.StateRunning, resumed.State)
		poll(t, 2*time.Minute, "the run to be done", func() (bool, error) {
			got, err = b.manager.Get(ctx, run.ID)
			return err == nil && got.State == replay.StateDone, err
		})
		require.EqualValues(t, n, got.Replayed)
		require.NotNil(t, got.FinishedAt)
		b.waitSettled(t, n)
		require.EqualValues(t, n, b.scalar(t, `SELECT count(DISTINCT event_id) FROM effects`), "every row processed once more")
		require.EqualValues(t, n, b.scalar(t, `SELECT count(*) FROM webhook_inbox`), "no row inserted")
		require.EqualValues(t, n, b.scalar(t, `SELECT count(*) FROM webhook_inbox WHERE attempts = 2`))
		_, err = b.manager.Resume(ctx, run.ID)
		require.ErrorIs(t, err, replay.ErrFinished)
	})

	t.Run("FailedRowsByErrorTextKeepTheirHistory", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start(t)
		// MaxAttempts 1, as worker.max_attempts 1 makes the receiver stamp it.
		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{MaxAttempts: 1})
		require.NoError(t, err)
		ingester := inboxstore.NewIngester(b.db.Pool, client, &inboxstore.IngesterConfig{})
		for i, typ := range []string{"broken", "broken", "account.deposit"} {
			_, err := ingester.Ingest(ctx, &inboxstore.Delivery{
				Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
				Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("evt_%d", i), Type: typ, Payload: []byte(`{}`)}},
			})
			require.NoError(t, err)
		}
		poll(t, time.Minute, "two failed rows", func() (bool, error) {
			return b.scalar(t, `SELECT count(*) FROM webhook_inbox WHERE status = 'failed'`) == 2 &&
				b.scalar(t, `SELECT count(*) FROM webhook_inbox WHERE status = 'done'`) == 1, nil
		})
		failed, err := b.store.List(ctx, &inboxstore.ListParams{Status: inbox.StatusFailed, ErrorContains: "CANNOT PARSE"})
		require.NoError(t, err)
		require.Len(t, failed, 2)
		require.Len(t, failed[0].AttemptErrors, 1)
		require.Contains(t, failed[0].AttemptErrors[0].Error, "cannot parse amount")
		require.NotNil(t, failed[0].FailedAt())

		// The handler is "fixed": the events are retyped, as a deploy would
		// change what the handler does with them.
		_, err = b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET event_type = 'account.deposit' WHERE status = 'failed'`)
		require.NoError(t, err)
		sel := inboxstore.Selection{Statuses: []inbox.Status{inbox.StatusFailed}, ErrorContains: "cannot parse"}
		run, err := b.manager.Start(ctx, &replay.StartParams{Selection: sel})
		require.NoError(t, err)
		require.EqualValues(t, 2, run.Total)
		b.waitSettled(t, 3)
		info, err := b.store.Lookup(ctx, "bank", "evt_0")
		require.NoError(t, err)
		require.Equal(t, inbox.StatusDone, info.Status)
		require.Equal(t, 2, info.Attempts)
		require.Len(t, info.AttemptErrors, 1, "the history outlives the replay")

		_, err = b.manager.ReplayEvent(ctx, "bank", "evt_2")
		require.NoError(t, err)
		b.waitSettled(t, 4)
		_, err = b.manager.ReplayEvent(ctx, "bank", "evt_9")
		require.ErrorIs(t, err, inbox.ErrNotFound)
	})

	t.Run("RefusesPendingRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.manager.Start(ctx, &replay.StartParams{Selection: inboxstore.Selection{Statuses: []inbox.Status{inbox.StatusPending}}})
		require.ErrorContains(t, err, "only done and failed rows")
		first := b.load(t, 1, inbox.StatusPending, "account.deposit")
		_, err = b.manager.ReplayEvent(ctx, "bank", "evt_0")
		require.ErrorIs(t, err, inboxstore.ErrNotReplayable)
		require.EqualValues(t, 0, b.scalar(t, `SELECT count(*) FROM river_job WHERE kind = $1`, inboxstore.JobKind))
		_ = first
	})
}

func TestStartWithAnEmptyMatchStartsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.load(t, 3, inbox.StatusFailed, "account.deposit")

	_, err := b.manager.Start(ctx, &replay.StartParams{Selection: inboxstore.Selection{Source: "bank", EventType: "no.such.type"}})
	require.ErrorIs(t, err, replay.ErrNothingToReplay)
	require.Zero(t, b.scalar(t, `SELECT count(*) FROM hookinbox_replay`), "no run is recorded")
	require.Zero(t, b.scalar(t, `SELECT count(*) FROM river_job`), "no job is enqueued")
	require.EqualValues(t, 3, b.scalar(t, `SELECT count(*) FROM webhook_inbox WHERE status = 'failed'`))
}
