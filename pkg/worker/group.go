package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// groupCommitter works events in group transactions, the worker's mirror
// of the receiver's inbox.Batcher. River starts a goroutine per fetched job;
// each one's Work queues its job here and waits. One collector gathers the
// queued jobs into groups: the jobs of one fetch arrive within a moment of
// each other, so a group waits up to GroupLingerDefault for them (and
// grows, up to maxEvents, while every flusher is busy). A flusher takes
// the group's rows in one statement, runs each event's handlers inside a
// savepoint of its own, and commits once. Then every Work returns, and
// River's batched completer completes the jobs: the row's done mark,
// committed with the effect, is the truth, and a job run again after a
// crash finds its row done and does nothing.
//
// Flushers, not River's worker count, bound the transactions in flight, so
// a worker with a thousand jobs in flight holds only as many connections as
// it has flushers.
type groupCommitter struct {
	worker    *eventWorker
	maxEvents int
	flushers  int
	linger    time.Duration
	queue     chan *pendingJob
	groups    chan []*pendingJob
	// waiting counts the jobs queued or in the collector's next group.
	waiting atomic.Int64
	// busy counts the flushers working a group.
	busy      atomic.Int64
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
// was recorded on the row already (in the group's transaction); or, with
// alone, that Work is to work the event in a transaction of its own.
type jobOutcome struct {
	err      error
	recorded bool
	alone    bool
}

func newGroupCommitter(w *eventWorker, flushers, maxEvents int, linger time.Duration) *groupCommitter {
	return &groupCommitter{
		worker: w, maxEvents: maxEvents, flushers: flushers, linger: linger,
		// Never full: River runs at most its worker count of Work at once.
		queue:  make(chan *pendingJob, 1024),
		groups: make(chan []*pendingJob),
		stop:   make(chan struct{}),
	}
}

func (g *groupCommitter) start() {
	g.startOnce.Do(func() {
		g.wg.Add(1 + g.flushers)
		go g.collect()
		for range g.flushers {
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
	g.waiting.Add(1)
	select {
	case g.queue <- p:
	case <-ctx.Done():
		g.waiting.Add(-1)
		return jobOutcome{err: ctx.Err()}
	}
	// A flusher always answers, soon after ctx ends: a group is cancelled
	// when any of its jobs' contexts is.
	return <-p.done
}

// collect gathers queued jobs into groups and hands each to a free
// flusher. The jobs gathered are ready when they fill a group, or when
// linger has passed since the first of them and nothing more is queued;
// until a flusher is free, they keep gathering. Ready jobs are shared out
// evenly among the idle flushers: a group's events run one after the
// other, so a fetch worked as one group by one flusher would leave the
// others idle and hold River's slots for longer (a handler of several
// statements drained at half the speed of a transaction per event that
// way).
func (g *groupCommitter) collect() {
	defer g.wg.Done()
	var (
		group  []*pendingJob
		timer  = time.NewTimer(time.Hour)
		ripe   bool
		expiry <-chan time.Time
	)
	timer.Stop()
	for {
		// Take what is queued already, so that a group sent is as full as
		// the queue allows.
	drain:
		for len(group) < g.maxEvents {
			select {
			case p := <-g.queue:
				group = g.add(group, p, timer, &expiry)
			default:
				break drain
			}
		}
		var in <-chan *pendingJob
		if len(group) < g.maxEvents {
			in = g.queue
		}
		var out chan<- []*pendingJob
		send := group
		if len(group) > 0 && (ripe || len(group) >= g.maxEvents) {
			out = g.groups
			idle := max(1, int64(g.flushers)-g.busy.Load())
			send = group[:(int64(len(group))+idle-1)/idle]
		}
		select {
		case <-g.stop:
			timer.Stop()
			return
		case p := <-in:
			group = g.add(group, p, timer, &expiry)
		case <-expiry:
			ripe, expiry = true, nil
		case out <- send:
			g.waiting.Add(-int64(len(send)))
			// The rest is still ripe: the next idle flusher takes it.
			group = slices.Clone(group[len(send):])
			if len(group) == 0 {
				ripe, expiry = false, nil
				timer.Stop()
			}
		}
	}
}

// add appends p to group, starting the linger on a group's first job.
func (g *groupCommitter) add(group []*pendingJob, p *pendingJob, timer *time.Timer, expiry *<-chan time.Time) []*pendingJob {
	if len(group) == 0 {
		timer.Reset(g.linger)
		*expiry = timer.C
	}
	return append(group, p)
}

func (g *groupCommitter) flushLoop() {
	defer g.wg.Done()
	for {
		select {
		case <-g.stop:
			return
		case group := <-g.groups:
			g.busy.Add(1)
			g.flush(group)
			g.busy.Add(-1)
		}
	}
}

// flush works a group and answers each of its jobs. A group that fails as a
// whole (its transaction broke, COMMIT failed) has committed nothing, and
// each of its events is worked again alone, so that one bad event fails only
// its own job. Events worked alone after a group are worked by their own
// Work, in parallel, each on a connection of the pool: the flusher goes
// back to groups.
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
				p.done <- jobOutcome{alone: true}
			}
			return
		}
		g.worker.logger.Info("group transaction failed; working its events one by one",
			zap.Int("events", len(live)), zap.Error(err))
	}
	if len(live) == 1 {
		live[0].done <- g.alone(live[0])
		return
	}
	for _, p := range live {
		p.done <- jobOutcome{alone: true}
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
// answers every job but those it returns, which are to be worked alone.
//
// A group holds the row locks its handlers took until it commits, and
// handlers that update hot rows (a balance, a counter, an order's state)
// take them in an order no one controls: two groups each waiting for a row
// the other holds deadlock, and PostgreSQL breaks the cycle only after
// deadlock_timeout (1 s), one event at a time. So a group waits at most
// GroupLockTimeoutDefault for another transaction's lock; the event that
// met the timeout (or a deadlock, or a serialization failure) is rolled
// back to its savepoint, the group ends there, and that event and the ones
// after it are worked alone once the group has committed and released its
// locks. A transaction of one event waits for locks as long as it must,
// as it would without groups. On error nothing committed and no job was
// answered.
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
	// The spans of the events' handlers, ended once the transaction has.
	var spans groupSpans
	if w.tracer != nil {
		spans = make(groupSpans, len(group))
		defer func() { spans.end(err) }()
	}
	err = pgx.BeginTxFunc(ctx, w.pool, inbox.WorkTxOptions(w.asyncCommit), func(tx pgx.Tx) error {
		taken, err := w.store.TakeManyForWork(ctx, tx, ids, jobIDs, time.Time{})
		if err != nil {
			return err
		}
		savepoints := &groupSavepoints{tx: tx}
		var undo []*inbox.Taken
		for i, p := range group {
			if deferred != nil {
				// The group ended at a lock conflict: the rest is worked
				// alone.
				if t := taken[p.job.Args.InboxID]; t != nil && t.JobID == p.job.ID {
					delete(taken, p.job.Args.InboxID)
					undo = append(undo, t)
					deferred = append(deferred, p)
					outcomes[i].recorded = true
				}
				continue
			}
			t := taken[p.job.Args.InboxID]
			if t == nil || t.JobID != p.job.ID {
				// Done already, gone, or taken for this row's other job
				// in this group: never run the effect twice.
				continue
			}
			// Used once: a second copy of the same job in this group (one
			// River rescued while the first still waited) finds nothing.
			delete(taken, p.job.Args.InboxID)
			// The event's savepoint is made with its handlers' first
			// statement (see eventTx).
			etx := savepoints.newEventTx()
			hctx := ctx
			if spans != nil {
				// The event's span is its job's child, in the group's
				// transaction.
				hctx, spans[i].span = w.startHandle(ctx, p.ctx, p.job)
			}
			herr := w.runHandlers(hctx, etx, t.Event)
			spans.record(i, herr)
			if savepoints.err != nil {
				return savepoints.err
			}
			if herr == nil {
				continue
			}
			if ctx.Err() != nil {
				return herr
			}
			if err := etx.rollback(ctx); err != nil {
				return err
			}
			if isLockConflict(herr) {
				// The row's done mark is rolled back below with those of
				// the events after it; all are worked alone once this
				// group has committed and released its locks.
				undo = append(undo, t)
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
		return w.store.UndoTakes(ctx, tx, undo)
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

// lockTimeoutSQL sets a group transaction's lock_timeout (see flushGroup).
var lockTimeoutSQL = fmt.Sprintf("SET LOCAL lock_timeout = %d", GroupLockTimeoutDefault.Milliseconds())

// isLockConflict reports an error another transaction's locks caused: a
// deadlock, a serialization failure, or a lock timeout.
func isLockConflict(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case pgerrcode.DeadlockDetected, pgerrcode.SerializationFailure, pgerrcode.LockNotAvailable:
		return true
	}
	return false
}
