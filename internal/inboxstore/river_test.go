package inboxstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// TestRiverSchemaContract runs every statement of the adapter to River's
// schema (river.go), and the one reliance on River's executor
// (pkg/worker's alignAttempts), against a schema River's own migrations
// (rivermigrate, through schema.Migrate) have just built: it fails when a
// River upgrade renames a column, a state or the insert channel, or drops
// what the statements read. The subtests share that schema and run one
// after another; each writes in a transaction it rolls back, except the
// last two, which need commits.
func TestRiverSchemaContract(t *testing.T) { //nolint:tparallel // its subtests share one schema, and the last two commit
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	_, err := schema.Migrate(ctx, db.Pool, nil, schema.Core())
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	store := inboxstore.New(db.Pool)

	inTx := func(t *testing.T) pgx.Tx {
		t.Helper()
		tx, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
		return tx
	}
	insert := func(t *testing.T, tx pgx.Tx, inboxID int64, opts *river.InsertOpts) *rivertype.JobRow {
		t.Helper()
		res, err := client.InsertTx(ctx, tx, inboxstore.JobArgs{InboxID: inboxID, Source: "bank", EventID: "evt"}, opts)
		require.NoError(t, err)
		return res.Job
	}
	type newest struct {
		ID          int64
		State       string
		Queue       string
		LastError   *string
		FinalizedAt *time.Time
	}
	newestOf := func(t *testing.T, db inboxstore.DBTX, inboxID int64) newest {
		t.Helper()
		var n newest
		require.NoError(t, db.QueryRow(ctx, `SELECT j.id, j.state, j.queue, j.last_error, j.finalized_at
FROM (SELECT $1::bigint AS id) AS i, LATERAL (`+inboxstore.NewestJob+`) AS j`, inboxID).
			Scan(&n.ID, &n.State, &n.Queue, &n.LastError, &n.FinalizedAt))
		return n
	}

	t.Run("NewestJobFindsARowsLastJobThroughMigration0008sIndex", func(t *testing.T) {
		tx := inTx(t)
		insert(t, tx, 41, &river.InsertOpts{Queue: "bank"})
		last := insert(t, tx, 41, &river.InsertOpts{Queue: "bank"})
		insert(t, tx, 42, &river.InsertOpts{Queue: "bank"})
		require.Equal(t, newest{ID: last.ID, State: "available", Queue: "bank"}, newestOf(t, tx, 41))

		_, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`)
		require.NoError(t, err)
		rows, err := tx.Query(ctx, `EXPLAIN SELECT j.id FROM (SELECT 41::bigint AS id) AS i, LATERAL (`+inboxstore.NewestJob+`) AS j`)
		require.NoError(t, err)
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Contains(t, strings.Join(plan, "\n"), "river_job_inbox_id_idx")
	})

	t.Run("DeadQueuesAndWaitingJobsFindTheJobsWaitingOnAQueueNoWorkerWorks", func(t *testing.T) {
		tx := inTx(t)
		insert(t, tx, 51, &river.InsertOpts{Queue: "gone"})
		insert(t, tx, 52, &river.InsertOpts{Queue: "later", ScheduledAt: time.Now().Add(time.Hour)})
		insert(t, tx, 53, &river.InsertOpts{Queue: "live"})

		dead, err := store.DeadQueues(ctx, tx, []string{"live"})
		require.NoError(t, err)
		require.Equal(t, []string{"gone", "later"}, dead)

		rows, err := tx.Query(ctx, `SELECT inbox_id FROM (`+inboxstore.WaitingJobs("$1")+`) AS w ORDER BY 1`, dead)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		require.Equal(t, []int64{51, 52}, ids)
	})

	t.Run("MoveJobsMovesAWaitingJobToItsSourcesQueue", func(t *testing.T) {
		tx := inTx(t)
		job := insert(t, tx, 61, &river.InsertOpts{Queue: "gone"})
		moved, err := store.MoveJobs(ctx, tx, []inboxstore.Move{{JobID: job.ID, From: "gone", To: "live"}}, []string{"live"})
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		got, err := client.JobGetTx(ctx, tx, job.ID)
		require.NoError(t, err)
		require.Equal(t, "live", got.Queue)
	})

	t.Run("SetJobMaxAttemptsRestampsAJob", func(t *testing.T) {
		tx := inTx(t)
		job := insert(t, tx, 71, &river.InsertOpts{Queue: "bank", MaxAttempts: 5})
		require.NoError(t, store.SetJobMaxAttempts(ctx, tx, job.ID, 3))
		got, err := client.JobGetTx(ctx, tx, job.ID)
		require.NoError(t, err)
		require.Equal(t, 3, got.MaxAttempts)
	})

	t.Run("NotifyInsertTxSpeaksRiversOwnInsertNotification", func(t *testing.T) {
		listener, err := pgx.Connect(ctx, db.URL)
		require.NoError(t, err)
		defer listener.Close(context.WithoutCancel(ctx))
		_, err = listener.Exec(ctx, `LISTEN "public.`+inboxstore.RiverInsertTopic+`"`)
		require.NoError(t, err)
		next := func(t *testing.T) (string, map[string]any) {
			t.Helper()
			waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			n, err := listener.WaitForNotification(waitCtx)
			require.NoError(t, err)
			var payload map[string]any
			require.NoError(t, json.Unmarshal([]byte(n.Payload), &payload))
			return n.Channel, payload
		}

		// River's own notification of an insert (the first of this
		// client and queue, so its rate limit lets it through)...
		tx := inTx(t)
		insert(t, tx, 81, &river.InsertOpts{Queue: "notified"})
		require.NoError(t, tx.Commit(ctx))
		riverChannel, riverPayload := next(t)
		require.Equal(t, map[string]any{"queue": "notified"}, riverPayload)

		// ...and the adapter's are the same channel and payload.
		tx = inTx(t)
		require.NoError(t, store.NotifyInsertTx(ctx, tx, client.Schema(), "notified"))
		require.NoError(t, tx.Commit(ctx))
		channel, payload := next(t)
		require.Equal(t, riverChannel, channel)
		require.Equal(t, riverPayload, payload)
	})

	// pkg/worker's alignAttempts lowers or raises a job's budget on the
	// *rivertype.JobRow River hands Work, and relies on River's executor
	// deciding on that very row when Work fails. Here Work lowers a budget
	// of 5 to 1: River must discard the job at its first failure. The
	// discarded job's error and end are what newestJob reads.
	t.Run("ExecutorDecidesOnTheJobRowWorkWasHanded", func(t *testing.T) {
		workers := river.NewWorkers()
		river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[inboxstore.JobArgs]) error {
			job.MaxAttempts = 1
			return errors.New("boom")
		}))
		worker, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
			Queues:            map[string]river.QueueConfig{"contract": {MaxWorkers: 1}},
			Workers:           workers,
			FetchCooldown:     5 * time.Millisecond,
			FetchPollInterval: 20 * time.Millisecond,
		})
		require.NoError(t, err)
		events, cancel := worker.Subscribe(river.EventKindJobFailed)
		defer cancel()
		require.NoError(t, worker.Start(ctx))
		defer func() { require.NoError(t, worker.Stop(context.WithoutCancel(ctx))) }()

		res, err := client.Insert(ctx, inboxstore.JobArgs{InboxID: 91, Source: "bank", EventID: "evt"},
			&river.InsertOpts{Queue: "contract", MaxAttempts: 5})
		require.NoError(t, err)
		select {
		case ev := <-events:
			require.Equal(t, res.Job.ID, ev.Job.ID)
			require.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)
		case <-time.After(time.Minute):
			t.Fatal("the job never failed")
		}
		n := newestOf(t, db.Pool, 91)
		require.Equal(t, "discarded", n.State)
		require.NotNil(t, n.LastError)
		require.Equal(t, "boom", *n.LastError)
		require.NotNil(t, n.FinalizedAt)
	})

	// Last: it reads committed jobs, on the pool.
	t.Run("QueueDepthsCountsUnfinishedJobsByQueueAndState", func(t *testing.T) {
		_, err := client.Insert(ctx, inboxstore.JobArgs{InboxID: 101}, &river.InsertOpts{Queue: "depth"})
		require.NoError(t, err)
		_, err = client.Insert(ctx, inboxstore.JobArgs{InboxID: 102}, &river.InsertOpts{Queue: "depth", ScheduledAt: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		depths, err := store.QueueDepths(ctx)
		require.NoError(t, err)
		require.Contains(t, depths, inboxstore.QueueDepth{Queue: "depth", State: "available", Count: 1})
		require.Contains(t, depths, inboxstore.QueueDepth{Queue: "depth", State: "scheduled", Count: 1})
	})
}
