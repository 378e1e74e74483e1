package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// waitReaperRun waits until the reaper's run at start has completed.
func (b *testBundle) waitReaperRun(t *testing.T) {
	t.Helper()
	poll(t, 30*time.Second, "the reaper's first run", func() (bool, error) {
		var n int
		err := b.db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM river_job WHERE kind = 'hookinbox.reaper' AND state = 'completed'`).Scan(&n)
		return n == 1, err
	})
}

// jobs counts the event jobs of row id.
func (b *testBundle) jobs(t *testing.T, id int64) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = $1 AND (args->>'inbox_id')::bigint = $2`, inboxstore.JobKind, id).Scan(&n))
	return n
}

// completeJob puts row id's job in the state River's completer leaves it
// in once Work returned nil, as long ago as age.
func (b *testBundle) completeJob(t *testing.T, id int64, age time.Duration) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `
UPDATE river_job SET state = 'completed', attempt = 1, attempted_at = now() - $2 * interval '1 millisecond',
       finalized_at = now() - $2 * interval '1 millisecond'
WHERE id = $1`, b.row(t, id).JobID, age.Milliseconds())
	require.NoError(t, err)
}

func TestReaperLostCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("LostDoneMarkIsRequeuedWithoutWaitingOrphanAfter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A young row whose done mark was lost in a crash with the effect,
		// while River's completer committed the job's completion after it.
		id := b.ingest(t, "evt_lost_mark", "account.deposit")
		b.completeJob(t, id, 2*worker.LostCommitGraceDefault)
		// Lost commits are looked for within OrphanAfter of the server's
		// start: far longer than the shared server has been up.
		b.start(t, func(c *worker.Config) { c.OrphanAfter = 100_000 * time.Hour })
		b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 1, b.effects(t, "evt_lost_mark"))
		require.Equal(t, 2, b.jobs(t, id), "the completed job and the reaper's")
	})

	t.Run("HeldRowBesideCompletedJobIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A held event whose source's Resume stopped half-way: pending,
		// held, its job completed, no pause. It waits OrphanAfter.
		id := b.ingest(t, "evt_held", "account.deposit")
		_, err := b.store.Pause(ctx, "bank", "test", "")
		require.NoError(t, err)
		held, err := b.store.Hold(ctx, b.db.Pool, id, "bank")
		require.NoError(t, err)
		require.True(t, held)
		b.completeJob(t, id, 2*worker.LostCommitGraceDefault)
		_, err = b.db.Pool.Exec(ctx, `DELETE FROM hookinbox_source_pause WHERE source = 'bank'`)
		require.NoError(t, err)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = 100_000 * time.Hour })
		b.waitReaperRun(t)
		require.Equal(t, inbox.StatusPending, b.row(t, id).Status)
		require.Equal(t, 1, b.jobs(t, id))
	})

	t.Run("JustCompletedJobWaitsTheGrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.ingest(t, "evt_just_completed", "account.deposit")
		b.completeJob(t, id, -time.Minute) // completed "in the future": within the grace for a minute
		b.start(t, func(c *worker.Config) { c.OrphanAfter = 100_000 * time.Hour })
		b.waitReaperRun(t)
		require.Equal(t, inbox.StatusPending, b.row(t, id).Status)
		require.Equal(t, 1, b.jobs(t, id))
	})
}

func TestReaperQueueMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// ingestOn claims an event whose job is enqueued on queue, as a
	// receiver still on an older config does.
	ingestOn := func(t *testing.T, b *testBundle, eventID, queue string) int64 {
		t.Helper()
		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{})
		require.NoError(t, err)
		ing := inboxstore.NewIngester(b.db.Pool, client, &inboxstore.IngesterConfig{QueueFor: func(string) string { return queue }})
		res, err := ing.Ingest(ctx, delivery(eventID, "account.deposit"))
		require.NoError(t, err)
		return res.Claimed[0].ID
	}
	jobQueue := func(t *testing.T, b *testBundle, id int64) (queue, state string) {
		t.Helper()
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT queue, state FROM river_job WHERE id = $1`, b.row(t, id).JobID).Scan(&queue, &state))
		return queue, state
	}

	t.Run("JobOnAQueueNoLiveWorkerWorksIsMovedToTheSourcesQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ingestOn(t, b, "evt_stranded", "old")
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 1, b.effects(t, "evt_stranded"))
		require.Equal(t, 1, b.jobs(t, id), "moved, not enqueued again")
		queue, _ := jobQueue(t, b, id)
		require.Equal(t, river.QueueDefault, queue)
	})

	t.Run("JobOnAQueueALiveWorkerWorksStays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ingestOn(t, b, "evt_old_worker", "old")
		// An old worker, still running, works "old" (its record, renewed).
		_, err := b.db.Pool.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, host, pid, expires_at)
VALUES ('old-worker', 'old', 'bank * -> effect; unrouted -> failed', 'test', 1, now() + interval '1 hour')`)
		require.NoError(t, err)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		b.waitReaperRun(t)
		queue, state := jobQueue(t, b, id)
		require.Equal(t, "old", queue)
		require.Equal(t, "available", state)
	})

	t.Run("JobIsNotMovedToAQueueNoLiveWorkerWorks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ingestOn(t, b, "evt_nowhere", river.QueueDefault)
		// This worker's config puts bank on "new", which it does not work:
		// moving there would strand the job anew.
		b.start(t, func(c *worker.Config) {
			c.Queues = map[string]int{"other": 1}
			c.Sources = map[string]string{"bank": "new"}
			c.OrphanAfter = time.Hour
		})
		b.waitReaperRun(t)
		queue, state := jobQueue(t, b, id)
		require.Equal(t, river.QueueDefault, queue)
		require.Equal(t, "available", state)
	})
}
