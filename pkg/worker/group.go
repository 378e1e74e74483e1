package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// groupCommitter works events in group transactions, the worker's mirror
// of the receiver's inbox.Batcher. River starts a goroutine per fetched job;
// each one's Work queues its job here and waits. A flusher takes whatever
// is queued (up to maxEvents), takes all those rows in one statement, runs
// each event's handlers inside a savepoint of its own, and commits once.
// Then every Work returns, and River's batched completer completes the
// jobs: the row's done mark, committed with the effect, is the truth, and a
// job run again after a crash finds its row done and does nothing.
//
// Flushers, not River's worker count, bound the transactions in flight, so
// a worker with a thousand jobs in flight holds only as many connections as
// it has flushers.
type groupCommitter struct {
	worker    *eventWorker
	maxEvents int
	flushers  int
	queue     chan *pendingJob
	stop      chan struct{}
	wg        sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
}

// pendingJob is a job waiting for its group's commit.
type pendingJob struct {
	ctx  context.Context
	job  *river.Job[inbox.JobArgs]
	done chan jobOutcome // buffered: a flusher never blocks on it
}

// jobOutcome is what a job's Work returns: err, and whether the failure
// was recorded on the row already (in the group's transaction).
type jobOutcome struct {
	err      error
	recorded bool
}

func newGroupCommitter(w *eventWorker, flushers, maxEvents int) *groupCommitter {
	return &groupCommitter{
		worker: w, maxEvents: maxEvents, flushers: flushers,
		// Never full: River runs at most its worker count of Work at once.
		queue: make(chan *pendingJob, 1024),
		stop:  make(chan struct{}),
	}
}

func (g *groupCommitter) start() {
	g.startOnce.Do(func() {
		for range g.flushers {
			g.wg.Add(1)
			go g.flushLoop()
		}
	})
}

// shutdown stops the flushers once River has stopped (no Work is running).
func (g *groupCommitter) shutdown() {
	g.stopOnce.Do(func() {
		close(g.stop)
		g.wg.Wait()
	})
}

// do queues job and waits for its group's outcome.
func (g *groupCommitter) do(ctx context.Context, job *river.Job[inbox.JobArgs]) jobOutcome {
	p := &pendingJob{ctx: ctx, job: job, done: make(chan jobOutcome, 1)}
	select {
	case g.queue <- p:
	case <-ctx.Done():
		return jobOutcome{err: ctx.Err()}
	}
	// A flusher always answers, soon after ctx ends: a group is cancelled
	// when any of its jobs' contexts is.
	return <-p.done
}

func (g *groupCommitter) flushLoop() {
	defer g.wg.Done()
	for {
		var first *pendingJob
		select {
		case <-g.stop:
			return
		case first = <-g.queue:
		}
		group := []*pendingJob{first}
	collect:
		for len(group) < g.maxEvents {
			select {
			case p := <-g.queue:
				group = append(group, p)
			default:
				break collect
			}
		}
		g.flush(group)
	}
}

// flush works a group and answers each of its jobs. A group that fails as a
// whole (its transaction broke, COMMIT failed) has committed nothing, and
// each of its events is worked again alone, so that one bad event fails only
// its own job.
func (g *groupCommitter) flush(group []*pendingJob) {
	live := group[:0]
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- jobOutcome{err: err}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	if len(live) > 1 {
		alone, err := g.flushGroup(live)
		if err == nil {
			for _, p := range alone {
				p.done <- g.alone(p)
			}
			return
		}
		g.worker.logger.Info("group transaction failed; working its events one by one",
			zap.Int("events", len(live)), zap.Error(err))
	}
	for _, p := range live {
		p.done <- g.alone(p)
	}
}

// alone works one event in a transaction of its own.
func (g *groupCommitter) alone(p *pendingJob) jobOutcome {
	if err := p.ctx.Err(); err != nil {
		return jobOutcome{err: err}
	}
	return jobOutcome{err: g.worker.process(p.ctx, p.job)}
}

// groupContext is cancelled when any job's context is done, and has the
// earliest of their deadlines: the group must end before any of its jobs
// gives up.
func groupContext(group []*pendingJob) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var deadline time.Time
	stops := make([]func() bool, 0, len(group))
	for _, p := range group {
		stops = append(stops, context.AfterFunc(p.ctx, cancel))
		if d, ok := p.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	cancelDeadline := context.CancelFunc(func() {})
	if !deadline.IsZero() {
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
	}
	return ctx, func() {
		cancelDeadline()
		cancel()
		for _, stop := range stops {
			stop()
		}
	}
}

// flushGroup works the group in one transaction and, once it committed,
// answers every job but those it returns, whose handlers met a lock
// conflict with another transaction (a deadlock, say) and are to be worked
// alone. On error nothing committed and no job was answered.
func (g *groupCommitter) flushGroup(group []*pendingJob) (alone []*pendingJob, err error) {
	ctx, cancel := groupContext(group)
	defer cancel()
	w := g.worker
	// Work the events in row order, the order the take locks them in.
	slices.SortFunc(group, func(a, b *pendingJob) int {
		return cmp.Compare(a.job.Args.InboxID, b.job.Args.InboxID)
	})
	ids, jobIDs := make([]int64, len(group)), make([]int64, len(group))
	for i, p := range group {
		ids[i], jobIDs[i] = p.job.Args.InboxID, p.job.ID
	}
	outcomes := make([]jobOutcome, len(group))
	var deferred []*pendingJob
	err = pgx.BeginTxFunc(ctx, w.pool, inbox.WorkTxOptions(w.asyncCommit), func(tx pgx.Tx) error {
		taken, err := w.store.TakeManyForWork(ctx, tx, ids, jobIDs, time.Time{})
		if err != nil {
			return err
		}
		savepoint := false
		for i, p := range group {
			t := taken[p.job.Args.InboxID]
			if t == nil || t.JobID != p.job.ID {
				// Done already, gone, or taken for this row's other job
				// in this group: never run the effect twice.
				continue
			}
			// One round trip moves the savepoint past the previous event.
			sp := "SAVEPOINT hookinbox_event"
			if savepoint {
				sp = "RELEASE SAVEPOINT hookinbox_event; SAVEPOINT hookinbox_event"
			}
			if _, err := tx.Exec(ctx, sp); err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
			savepoint = true
			herr := w.runHandlers(ctx, tx, t.Event)
			if herr == nil {
				continue
			}
			if ctx.Err() != nil {
				return herr
			}
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT hookinbox_event"); err != nil {
				return fmt.Errorf("rollback to savepoint: %w", err)
			}
			if isLockConflict(herr) {
				// The row's done mark is rolled back below; the event is
				// worked alone once this group has committed and released
				// its locks.
				if err := w.store.UndoTake(ctx, tx, t, nil, time.Time{}); err != nil {
					return err
				}
				deferred = append(deferred, p)
				outcomes[i].recorded = true // not answered with this outcome
				continue
			}
			final := inbox.IsPermanent(herr) || p.job.Attempt >= p.job.MaxAttempts
			if err := w.store.UndoTake(ctx, tx, t, &inbox.TakeFailure{Reason: herr.Error(), Final: final}, time.Time{}); err != nil {
				return err
			}
			outcomes[i] = jobOutcome{err: herr, recorded: true}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, p := range group {
		if slices.Contains(deferred, p) {
			continue
		}
		p.done <- outcomes[i]
	}
	return deferred, nil
}

// isLockConflict reports an error another transaction's locks caused: a
// deadlock, a serialization failure, or a lock timeout.
func isLockConflict(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40P01", "40001", "55P03":
		return true
	}
	return false
}
