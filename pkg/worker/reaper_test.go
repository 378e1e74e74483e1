package worker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// healWindow is the tests' OrphanAfter, and so the reaper's window for
// lost commits after it sees a server change: far longer than a test runs,
// so that no row of theirs is an orphan by age.
const healWindow = 10 * time.Minute

// serverChange is how the database server differs from the one the reaper
// noted last.
type serverChange int

const (
	sameServer serverChange = iota
	// restarted: its postmaster started after the one noted.
	restarted
	// promoted: a standby promoted since, on another timeline, its
	// postmaster started before the outage.
	promoted
)

// serverSeen stores the server as the reaper noted it seenAgo ago, before
// change: after a promotion, the row the old primary replicated.
func (b *testBundle) serverSeen(t *testing.T, seenAgo time.Duration, change serverChange) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `
INSERT INTO hookinbox_server_seen (postmaster_start, timeline, seen_at)
VALUES (pg_postmaster_start_time() - CASE WHEN $1 THEN interval '1 day' ELSE interval '0' END,
        CASE WHEN $2 THEN '00000000' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END,
        now() - $3 * interval '1 millisecond')`, change == restarted, change == promoted, seenAgo.Milliseconds())
	require.NoError(t, err)
}

// finishJob puts row id's job in state, as River's completer leaves it
// once Work returned, as long ago as age; a discarded or cancelled job
// with the error Work returned.
func (b *testBundle) finishJob(t *testing.T, id int64, state string, age time.Duration) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `
UPDATE river_job SET state = $2::river_job_state, attempt = 1, attempted_at = now() - $3 * interval '1 millisecond',
       finalized_at = now() - $3 * interval '1 millisecond',
       errors = CASE WHEN $2::text = 'completed' THEN NULL ELSE ARRAY[jsonb_build_object('error', 'cannot ever work', 'attempt', 1, 'at', now())] END
WHERE id = $1`, b.row(t, id).JobID, state, age.Milliseconds())
	require.NoError(t, err)
}

func TestReaperLostCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// The state an outage leaves: the row's write lost (a done mark
	// committed asynchronously, or a failure the worker could not record),
	// while River's completer, retrying across the outage, finished the job
	// after it. The reaper heals the row at its first pass on a server it
	// has not noted before, and at every pass within orphan_after of that;
	// on the server it noted long ago, the row waits for the orphan rule.
	for _, tc := range []struct {
		name     string
		jobState string // the state the completer left the job in
		seenAgo  time.Duration
		change   serverChange
		want     inbox.Status
		jobs     int    // the row's jobs at the end
		lastErr  string // the row's last_error at the end
	}{
		{"LostDoneMarkIsRequeuedAtTheFirstPassAfterAPromotion", "completed", 2 * healWindow, promoted, inbox.StatusDone, 2, ""},
		{"LostDoneMarkIsRequeuedAtTheFirstPassAfterARestart", "completed", 2 * healWindow, restarted, inbox.StatusDone, 2, ""},
		{"LostFailureIsRecordedAtTheFirstPassAfterAPromotion", "cancelled", 2 * healWindow, promoted, inbox.StatusFailed, 1, "job cancelled: cannot ever work"},
		{"LostFailureIsRecordedAtTheFirstPassAfterARestart", "discarded", 2 * healWindow, restarted, inbox.StatusFailed, 1, "job discarded: cannot ever work"},
		// The completion landed after the first pass on the new server.
		{"LostDoneMarkIsRequeuedWithinTheWindow", "completed", healWindow / 2, sameServer, inbox.StatusDone, 2, ""},
		// No outage since: no scan of every pending row.
		{"SameServerSeenLongAgoLeavesTheRowToTheOrphanRule", "completed", 2 * healWindow, sameServer, inbox.StatusPending, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			id := b.ingest(t, "evt_lost", "account.deposit")
			b.finishJob(t, id, tc.jobState, 2*worker.LostCommitGraceDefault)
			b.serverSeen(t, tc.seenAgo, tc.change)
			b.start(t, func(c *worker.Config) { c.OrphanAfter = healWindow })
			b.waitReaperRun(t)
			ev := b.waitStatus(t, id, tc.want)
			require.Equal(t, tc.lastErr, ev.LastError)
			require.Equal(t, tc.jobs, b.jobs(t, id))
			effects := 0
			if tc.want == inbox.StatusDone {
				effects = 1
			}
			require.Equal(t, effects, b.effects(t, "evt_lost"), "the effect applied once, by the reaper's job")
		})
	}

	t.Run("LiveWorkIsLeftAloneAfterAPromotion", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Rows whose jobs will settle them: one running (its Work goes on,
		// or River's rescuer takes it back), one scheduled, one waiting to
		// be retried, one pending with no job yet.
		live := map[string]string{"evt_running": "running", "evt_scheduled": "scheduled", "evt_retryable": "retryable"}
		ids := map[string]int64{}
		for eventID, state := range live {
			ids[eventID] = b.ingest(t, eventID, "account.deposit")
			_, err := b.db.Pool.Exec(ctx, `
UPDATE river_job SET state = $2::river_job_state, attempt = 1, attempted_at = now(),
       scheduled_at = CASE WHEN $2::text = 'running' THEN scheduled_at ELSE now() + interval '1 hour' END
WHERE id = $1`, b.row(t, ids[eventID]).JobID, state)
			require.NoError(t, err)
		}
		claimed, err := b.store.Claim(ctx, b.db.Pool, []*inboxstore.Delivery{delivery("evt_no_job", "account.deposit")}, time.Now())
		require.NoError(t, err)
		b.serverSeen(t, 2*healWindow, promoted)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = healWindow })
		b.waitReaperRun(t)
		for eventID, state := range live {
			require.Equal(t, inbox.StatusPending, b.row(t, ids[eventID]).Status, eventID)
			require.Equal(t, 1, b.jobs(t, ids[eventID]), eventID)
			var now string
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, b.row(t, ids[eventID]).JobID).Scan(&now))
			require.Equal(t, state, now, eventID)
		}
		require.Equal(t, 0, b.jobs(t, claimed[0].ID))
	})

	t.Run("JobLeftRunningByALostCompletionIsRescued", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The worker's done mark was lost with its job's completion: the
		// job stays running until River's rescuer takes it back,
		// rescue_after after it started; the reaper leaves it alone.
		id := b.ingest(t, "evt_stuck", "account.deposit")
		_, err := b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '1 minute' WHERE id = $1`,
			b.row(t, id).JobID)
		require.NoError(t, err)
		b.serverSeen(t, 2*healWindow, promoted)
		start := time.Now()
		b.start(t, func(c *worker.Config) {
			c.OrphanAfter = healWindow
			c.JobTimeout, c.RescueAfter = time.Second, 2*time.Second
		})
		b.waitStatus(t, id, inbox.StatusDone)
		t.Logf("rescued and done %s after the worker started", time.Since(start).Round(time.Millisecond))
		require.Equal(t, 1, b.effects(t, "evt_stuck"))
		require.Equal(t, 1, b.jobs(t, id), "rescued, not enqueued again")
	})

	t.Run("HeldRowBesideCompletedJobIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A held event whose source's Resume stopped half-way: pending,
		// held, its job completed, no pause. It waits OrphanAfter, even
		// after an outage.
		id := b.ingest(t, "evt_held", "account.deposit")
		_, err := b.store.Pause(ctx, "bank", "test", "")
		require.NoError(t, err)
		held, err := b.store.Hold(ctx, b.db.Pool, id, "bank")
		require.NoError(t, err)
		require.True(t, held)
		b.finishJob(t, id, "completed", 2*worker.LostCommitGraceDefault)
		_, err = b.db.Pool.Exec(ctx, `DELETE FROM hookinbox_source_pause WHERE source = 'bank'`)
		require.NoError(t, err)
		b.serverSeen(t, 2*healWindow, promoted)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = healWindow })
		b.waitReaperRun(t)
		require.Equal(t, inbox.StatusPending, b.row(t, id).Status)
		require.Equal(t, 1, b.jobs(t, id))
	})

	t.Run("JustCompletedJobWaitsTheGrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.ingest(t, "evt_just_completed", "account.deposit")
		b.finishJob(t, id, "completed", -time.Minute) // completed "in the future": within the grace for a minute
		b.serverSeen(t, 2*healWindow, promoted)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = healWindow })
		b.waitReaperRun(t)
		require.Equal(t, inbox.StatusPending, b.row(t, id).Status)
		require.Equal(t, 1, b.jobs(t, id))
	})
}

func TestReaperQueueMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// ingestOn claims an event of eventType whose job is enqueued on queue,
	// as a receiver still on an older config does.
	ingestOn := func(t *testing.T, b *testBundle, eventID, eventType, queue string) int64 {
		t.Helper()
		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{})
		require.NoError(t, err)
		ing := inboxstore.NewIngester(b.db.Pool, client, &inboxstore.IngesterConfig{QueueFor: func(string) string { return queue }})
		res, err := ing.Ingest(ctx, delivery(eventID, eventType))
		require.NoError(t, err)
		return res.Claimed[0].ID
	}
	jobAt := func(t *testing.T, b *testBundle, job int64) (queue, state string) {
		t.Helper()
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT queue, state FROM river_job WHERE id = $1`, job).Scan(&queue, &state))
		return queue, state
	}
	// jobQueue is the queue and state of row id's newest job.
	jobQueue := func(t *testing.T, b *testBundle, id int64) (queue, state string) {
		t.Helper()
		return jobAt(t, b, b.row(t, id).JobID)
	}
	// movedAndRun waits until job was moved to the source's queue and ran.
	movedAndRun := func(t *testing.T, b *testBundle, job int64) {
		t.Helper()
		poll(t, 30*time.Second, "the job moved and run", func() (bool, error) {
			queue, state := jobAt(t, b, job)
			return queue == river.QueueDefault && state == "completed", nil
		})
	}

	t.Run("JobOnAQueueNoLiveWorkerWorksIsMovedToTheSourcesQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ingestOn(t, b, "evt_stranded", "account.deposit", "old")
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 1, b.effects(t, "evt_stranded"))
		require.Equal(t, 1, b.jobs(t, id), "moved, not enqueued again")
		queue, _ := jobQueue(t, b, id)
		require.Equal(t, river.QueueDefault, queue)
	})

	t.Run("JobOfADoneRowOnADeadQueueIsMovedToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A worker of "old" committed the event and was killed before River
		// completed the job; the rescued job waits on "old", which no
		// worker works since the move.
		id := ingestOn(t, b, "evt_done_stranded", "account.deposit", "old")
		_, err := b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET status = 'done', processed_at = now() WHERE id = $1`, id)
		require.NoError(t, err)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		movedAndRun(t, b, b.row(t, id).JobID)
		require.Equal(t, 0, b.effects(t, "evt_done_stranded"), "a done row's job runs as a no-op")
		require.Equal(t, inbox.StatusDone, b.row(t, id).Status)
	})

	t.Run("OlderJobOfADoneRowOnADeadQueueIsMovedToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A worker of "old" held the event (its source paused) and was
		// killed before River completed the job; the Resume enqueued the
		// event again on the source's new queue, where it ran; then River
		// rescued the older job, which waits on "old" behind a newer one.
		id := ingestOn(t, b, "evt_done_older", "account.deposit", "old")
		older := b.row(t, id).JobID
		_, err := b.db.Pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, attempt, attempted_at, finalized_at)
SELECT args, kind, max_attempts, priority, $2, 'completed', 1, now(), now() FROM river_job WHERE id = $1`, older, river.QueueDefault)
		require.NoError(t, err)
		_, err = b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET status = 'done', processed_at = now() WHERE id = $1`, id)
		require.NoError(t, err)
		require.NotEqual(t, older, b.row(t, id).JobID, "the newer job is the row's newest")
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		movedAndRun(t, b, older)
		require.Equal(t, 0, b.effects(t, "evt_done_older"), "a done row's job runs as a no-op")
		require.Equal(t, inbox.StatusDone, b.row(t, id).Status)
	})

	t.Run("OlderJobOfAPendingRowWaitsUntilTheRowIsDone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.flakyFailures.Store(1)
		// An event on "old": attempt 1 failed (charged); attempt 2 held it
		// (its source paused) and the move killed its worker before River
		// completed the job, which River's rescuer made retryable at
		// attempt 2 of 3. The Resume, on the old config, enqueued the event
		// again on "old". Moved first, the older job would run its last
		// attempt: one transient failure would fail the event for good,
		// and the newer job would stay on "old" behind a failed row.
		id := ingestOn(t, b, "evt_two_jobs", "flaky", "old")
		older := b.row(t, id).JobID
		_, err := b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET attempts = 1, last_error = 'downstream unavailable' WHERE id = $1`, id)
		require.NoError(t, err)
		_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'retryable', attempt = 2, max_attempts = 3,
    attempted_at = now() - interval '1 minute', scheduled_at = now() - interval '1 second' WHERE id = $1`, older)
		require.NoError(t, err)
		var newer int64
		require.NoError(t, b.db.Pool.QueryRow(ctx, `INSERT INTO river_job (args, kind, max_attempts, priority, queue, state)
SELECT args, kind, 3, priority, 'old', 'available' FROM river_job WHERE id = $1 RETURNING id`, older).Scan(&newer))
		// The reaper runs once, at start: it moves the newest job only,
		// which fails once, is retried and settles the row.
		first := b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		b.waitStatus(t, id, inbox.StatusDone)
		require.Equal(t, 1, b.effects(t, "evt_two_jobs"))
		queue, state := jobAt(t, b, older)
		require.Equal(t, "old", queue, "a pending row's older job is not moved")
		require.Contains(t, []string{"available", "retryable"}, state, "it still waits (River's scheduler makes a due retryable job available)")
		// The next pass (the next leader's, at its start) moves it: the
		// row is done, and it runs as a no-op.
		require.NoError(t, first.Stop(ctx))
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		movedAndRun(t, b, older)
		require.Equal(t, 1, b.effects(t, "evt_two_jobs"))
		require.Equal(t, inbox.StatusDone, b.row(t, id).Status)
	})

	t.Run("JobOfAFailedRowOnADeadQueueStays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// As above, but the row failed for good (a permanent failure at
		// attempt 1 of 3, River's cancel lost with the worker): its job
		// would run the handlers again, a replay no operator asked for.
		failed := ingestOn(t, b, "evt_failed_stranded", "account.deposit", "old")
		_, err := b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET status = 'failed', attempts = 1, last_error = 'cannot ever work', processed_at = now() WHERE id = $1`, failed)
		require.NoError(t, err)
		// A done row's job beside it, which the same reaper pass moves:
		// the signal that the pass has looked at "old".
		done := ingestOn(t, b, "evt_done_beside", "account.deposit", "old")
		_, err = b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET status = 'done', processed_at = now() WHERE id = $1`, done)
		require.NoError(t, err)
		b.start(t, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		poll(t, 30*time.Second, "the done row's job moved", func() (bool, error) {
			queue, _ := jobQueue(t, b, done)
			return queue == river.QueueDefault, nil
		})
		queue, state := jobQueue(t, b, failed)
		require.Equal(t, "old", queue)
		require.Equal(t, "available", state)
		r := b.row(t, failed)
		require.Equal(t, inbox.StatusFailed, r.Status)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, "cannot ever work", r.LastError)
		require.Equal(t, 0, b.effects(t, "evt_failed_stranded"))
	})

	t.Run("JobOnAQueueALiveWorkerWorksStays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ingestOn(t, b, "evt_old_worker", "account.deposit", "old")
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
		id := ingestOn(t, b, "evt_nowhere", "account.deposit", river.QueueDefault)
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

// A backlog of events does not hold the reaper back: the worker's own
// jobs come before events in River's fetch order (they heal what a backlog
// strands: stale locks, orphans, jobs on a dead queue). Both of the
// worker's slots are held by events whose handler waits on a gate while a
// backlog is enqueued and then a reaper job; once the gate opens, the
// reaper runs before the backlog, not after it.
func TestReaperRunsBeforeABacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	gate := make(chan struct{})
	b.start(t, func(c *worker.Config) {
		c.Queues = map[string]int{river.QueueDefault: 2}
		// Often enough that one is enqueued behind the backlog soon; not so
		// often that reaper jobs, at priority 1, fill both slots on a busy
		// machine (at 100 ms, 200 of them ran while the backlog of 60 waited
		// past 30 s).
		c.ReaperInterval = time.Second
		c.OrphanAfter = time.Hour
		c.JobTimeout = time.Minute // the gate stays shut for far less
		c.Routes = append(slices.Clone(routes), worker.Route{Source: "bank", Types: []string{"gated"}, Handlers: []string{"gated"}})
		c.Registry.Register("gated", func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	})
	b.ingest(t, "evt_gated_1", "gated")
	b.ingest(t, "evt_gated_2", "gated")
	poll(t, 30*time.Second, "both slots held by the gated events", func() (bool, error) {
		var n int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'running'`, inboxstore.JobKind).Scan(&n)
		return n == 2, err
	})

	const backlog = 60
	d := delivery("evt_backlog_00", "account.deposit")
	for i := 1; i < backlog; i++ {
		d.Events = append(d.Events, inboxstore.IncomingEvent{ID: fmt.Sprintf("evt_backlog_%02d", i), Type: "account.deposit", Payload: []byte(`{}`)})
	}
	res, err := b.ingester.Ingest(ctx, d)
	require.NoError(t, err)
	require.Equal(t, backlog, res.New)
	// Behind the backlog in River's order at one priority (scheduled_at,
	// then id), not only by id: a reaper insert that took its id after the
	// backlog's but stamped its time before would go first anyway.
	var reaperJob int64
	poll(t, 30*time.Second, "a reaper job enqueued behind the backlog", func() (bool, error) {
		err := b.db.Pool.QueryRow(ctx, `
SELECT coalesce(min(r.id), 0) FROM river_job AS r
WHERE r.kind = 'hookinbox.reaper'
  AND NOT EXISTS (SELECT 1 FROM river_job AS e WHERE e.kind = $1 AND (e.scheduled_at, e.id) > (r.scheduled_at, r.id))`, inboxstore.JobKind).Scan(&reaperJob)
		return reaperJob != 0, err
	})
	close(gate)

	poll(t, 30*time.Second, "the backlog done", func() (bool, error) {
		var n int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE event_id LIKE 'evt_backlog_%' AND status = 'done'`).Scan(&n)
		return n == backlog, err
	})
	poll(t, 30*time.Second, "the reaper job run", func() (bool, error) {
		var state string
		err := b.db.Pool.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1`, reaperJob).Scan(&state)
		return state == "completed", err
	})
	var before int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM river_job AS e, river_job AS r
WHERE r.id = $1 AND e.kind = $2 AND e.args->>'event_id' LIKE 'evt_backlog_%' AND e.attempted_at < r.attempted_at`,
		reaperJob, inboxstore.JobKind).Scan(&before))
	// At most one fetch's worth (two slots) of the backlog may come first.
	require.LessOrEqual(t, before, 2, "backlog jobs fetched before the reaper job enqueued after them")
}
