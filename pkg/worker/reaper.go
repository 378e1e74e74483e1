package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// reaperArgs are the arguments of the periodic reaper job.
type reaperArgs struct{}

// Kind implements river.JobArgs.
func (reaperArgs) Kind() string { return "hookinbox.reaper" }

// reaperBatch caps the rows one reaper run touches.
const reaperBatch = 1000

// reaperSequenceBatch caps the stalled sequence keys one reaper run wakes:
// each holds an advisory lock until the run commits.
const reaperSequenceBatch = 100

// LostCommitGraceDefault is how long after its newest job finished a
// pending row must wait before the reaper heals it as a lost commit. The
// rule needs no wait (see inboxstore.Store.ListOrphans); the grace is a
// margin for a completion written by a host whose clock runs ahead.
const LostCommitGraceDefault = 5 * time.Second

// reaperLock is the transaction-scoped advisory lock that serialises
// reaper passes, so that two passes (two workers' reapers) never act on
// the same row from two snapshots: the second one's query runs after the
// first one committed, and sees the jobs it inserted or moved.
const reaperLock int64 = 0x686b726561706572 // "hkreaper"

// reaper heals pending rows that no job will settle:
//
//   - a row whose job vanished (deleted by hand, or never enqueued by an
//     older build) gets a new job once it is OrphanAfter old;
//   - a row whose job was discarded or cancelled without the failure being
//     recorded (its worker died at the last attempt, say) is marked failed
//     with the job's last error, so the reaper never loops on it;
//   - within OrphanAfter of a restart of the database server or a
//     promotion of a standby (a server it has not seen before: see
//     inboxstore.Store.NoteServer), at every pass, a row whose write an
//     outage lost while River's completer, retrying across it, finished
//     the job afterwards: a done mark lost with an asynchronous commit
//     (its job completed) gets a new job, a failure that was not recorded
//     (its job discarded or cancelled) is recorded as above, once the job
//     finished LostCommitGraceDefault ago;
//   - a row whose job waits on a queue that no live worker works, and is
//     no longer its source's queue (the source moved), has that job moved
//     to its source's queue, provided a live worker works that one;
//   - a sequence key with an event parked more than OrphanAfter ago has
//     its lowest parked event woken, in case the event it waited for will
//     not wake it (failed for good, purged): woken too early, it parks
//     again.
//
// A row whose job is available, scheduled, retryable or running is alive
// and left alone (but for a stray's move). Running jobs whose worker died,
// or whose completion an outage lost, are River's rescuer's to heal, after
// RescueAfter.
type reaper struct {
	river.WorkerDefaults[reaperArgs]

	pool        *pgxpool.Pool
	store       *inboxstore.Store
	orphanAfter time.Duration
	// stallAfter is how long an event may stay parked behind a key no
	// running event holds before the reaper wakes it (see wakeStalled).
	stallAfter time.Duration
	// sequenceOf is the sequence option of this worker's route of a
	// source's event type (router.sequenceOf).
	sequenceOf func(source, eventType string) *SequenceOption
	queueFor   func(string) string
	// queues maps each configured source to its current queue.
	queues map[string]string
	logger *zap.Logger
}

// Work runs one reaper pass.
func (r *reaper) Work(ctx context.Context, _ *river.Job[reaperArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	_, err = r.reapOnce(ctx, client)
	return err
}

// reapResult counts what one reaper pass did.
type reapResult struct {
	// Requeued are the rows given a new job; Failed the rows marked failed;
	// Moved the jobs moved to their source's queue; Woken the parked
	// events of stalled sequence keys woken.
	Requeued, Failed, Moved, Woken int
}

func (r *reaper) reapOnce(ctx context.Context, client *river.Client[pgx.Tx]) (*reapResult, error) {
	res := &reapResult{}
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, reaperLock); err != nil {
			return err
		}
		server, err := r.store.NoteServer(ctx, tx, r.orphanAfter)
		if err != nil {
			return err
		}
		if server.Changed {
			r.logger.Info("a database server the reaper has not seen before (restarted, or a promoted standby): looking for commits an outage lost at every pass",
				zap.Time("until", server.Since.Add(r.orphanAfter)))
		}
		live, err := liveQueues(ctx, tx)
		if err != nil {
			return err
		}
		orphans, err := r.store.ListOrphans(ctx, tx, &inboxstore.OrphanQuery{
			OrphanAfter: r.orphanAfter, LostCommits: server.Recent, LostCommitGrace: LostCommitGraceDefault,
			Queues: r.queues, LiveQueues: live, Limit: reaperBatch,
		})
		if err != nil {
			return err
		}
		requeue, moves, err := r.settle(ctx, tx, orphans, res)
		if err != nil {
			return err
		}
		if res.Moved, err = r.store.MoveJobs(ctx, tx, moves, live); err != nil {
			return err
		}
		res.Requeued = len(requeue)
		if err := r.store.EnqueueTx(ctx, tx, client, requeue, r.queueFor); err != nil {
			return err
		}
		res.Woken, err = r.wakeStalled(ctx, tx, client)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	if res.Requeued+res.Failed+res.Moved+res.Woken > 0 {
		r.logger.Info("reaper healed orphaned rows", zap.Int("requeued", res.Requeued), zap.Int("failed", res.Failed),
			zap.Int("moved", res.Moved), zap.Int("woken", res.Woken))
	}
	return res, nil
}

// settle fails the orphans whose job ended without recording it, and
// returns those to enqueue again and the jobs to move.
func (r *reaper) settle(ctx context.Context, tx pgx.Tx, orphans []inboxstore.Orphan, res *reapResult) ([]inboxstore.ClaimedRow, []inboxstore.Move, error) {
	var (
		requeue []inboxstore.ClaimedRow
		moves   []inboxstore.Move
	)
	for _, o := range orphans {
		switch o.JobState {
		case "discarded", "cancelled":
			reason := fmt.Sprintf("job %s: %s", o.JobState, o.JobError)
			if err := r.store.RecordFailure(ctx, tx, o.ID, 0, reason, true, time.Time{}); err != nil {
				return nil, nil, err
			}
			res.Failed++
		case "available", "retryable", "scheduled":
			moves = append(moves, inboxstore.Move{JobID: o.JobID, From: o.JobQueue, To: r.queues[o.Source]})
		default:
			requeue = append(requeue, inboxstore.ClaimedRow{
				ID: o.ID, Source: o.Source, EventID: o.EventID, Status: inbox.StatusPending, EventType: o.EventType, RequestID: o.RequestID,
			})
		}
	}
	return requeue, moves, nil
}

// wakeStalled wakes the lowest parked event of each sequence key whose
// events have been parked longer than stallAfter (a reaper pass), and
// returns how many it woke. A key whose lock is taken is left alone: an
// event of it is running, and wakes it. One that no running event holds
// may still be waited for (the event ahead is pending, between attempts):
// the woken event then counts it ahead and parks again, which costs a job.
// But the event ahead may also have run where no route sequences its
// events (a route change rolling out, either way) and so never wake it.
// A woken event whose route here does not sequence it (its source's, or
// only its type's: another route of the source may still sequence) will
// wake nothing when it runs, so the key's next parked event is woken too,
// and so on, up to reaperBatch wakes a pass over all keys.
func (r *reaper) wakeStalled(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx]) (int, error) {
	keys, err := r.store.ListStalledSequences(ctx, tx, r.stallAfter, reaperSequenceBatch)
	if err != nil {
		return 0, err
	}
	woken := 0
	for _, k := range keys {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, sequenceLock(k.Source, k.Key)).Scan(&locked); err != nil {
			return woken, fmt.Errorf("sequence lock: %w", err)
		}
		if !locked {
			continue
		}
		n := 0
		for more := true; more && (n == 0 || woken < reaperBatch); n++ {
			row, err := r.store.WakeSequenceTx(ctx, tx, &inboxstore.WakeParams{Source: k.Source, Key: k.Key, Client: client, QueueFor: r.queueFor})
			if err != nil {
				return woken, err
			}
			if row == nil {
				break
			}
			woken++
			more = r.sequenceOf(row.Source, row.EventType) == nil
		}
		if n > 0 {
			if err := r.store.NotifyInsertTx(ctx, tx, client.Schema(), r.queueFor(k.Source)); err != nil {
				return woken, err
			}
		}
	}
	return woken, nil
}
