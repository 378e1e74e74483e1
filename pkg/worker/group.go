package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/groupcommit"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/limiter"
)

// groupCommitter works events in group transactions: internal/groupcommit's
// engine, as the receiver's inboxstore.Batcher is, with eventWorker.flushGroup
// as its flush. River starts a goroutine per fetched job; each one's Work
// queues its job here and waits. The engine's collector gathers the queued
// jobs into groups: the jobs of one fetch arrive within a moment of each
// other, so a group waits up to groupLingerDefault for them (and grows, up
// to maxEvents, while every flusher is busy), and a ready group is shared
// out evenly among the idle flushers (a group's events run one after the
// other, so a fetch worked as one group by one flusher would leave the
// others idle and hold River's slots for longer). A flusher takes the
// group's rows in one statement, runs each event's handlers inside a
// savepoint of their own, and commits once. Then every Work returns, and
// River's batched completer completes the jobs: the row's done mark,
// committed with the effect, is the truth, and a job run again after a
// crash finds its row done and does nothing.
//
// Flushers, not River's worker count, bound the transactions in flight, so
// a worker with a thousand jobs in flight holds only as many connections as
// it has flushers.
type groupCommitter = groupcommit.Committer[*eventRun, jobOutcome]

// groupRequest is a job's run waiting in a group, its route resolved.
type groupRequest = groupcommit.Request[*eventRun]

// newGroupCommitter returns w's group committer, not started. Its queue
// holds as many jobs as queues' River workers run at once: it never fills.
// sources are the sources whose queue is one of queues.
func newGroupCommitter(w *eventWorker, flushers, maxEvents int, linger time.Duration, queues map[string]int, sources int) *groupCommitter {
	w.limit = limiter.New(flushers)
	inFlight := 0
	for _, n := range queues {
		inFlight += n
	}
	config := &groupcommit.Config[*eventRun]{
		MaxSize: maxEvents, Linger: linger, Flushers: flushers, QueueSize: max(1, inFlight),
		// A group is cancelled when any of its jobs' contexts is, so each
		// Work is answered soon after its context ends, and learns what
		// became of its event.
		WaitForAnswer: true,
		// How many of the flushers run a transaction at once adapts to
		// the database's latency (see eventWorker.inTx).
		Limiter: w.limit,
		// Groups take the sources' jobs in turns, and a source that holds
		// a group transaction may not take the last one the limit leaves:
		// an event of a quiet source fetched behind a storm's thousand
		// jobs (on a queue of its own, see docs/deploying.md) is in the
		// next group, and that group starts at once. River's slots bound
		// the queue, so no share limit.
		Key:   func(run *eventRun) string { return run.job.Args.Source },
		Share: 1,
	}
	if sources < 2 {
		// No other source's event can come: the last flusher kept for
		// one would stay idle for ever.
		config.Key, config.Share = nil, 0
	}
	return groupcommit.New(w.flushGroup, config)
}

// inGroup queues run for a group transaction and waits for its outcome;
// alone when the event is to be worked in a transaction of its own.
func (w *eventWorker) inGroup(ctx context.Context, run *eventRun) jobOutcome {
	out, err := w.group.Do(ctx, run)
	switch {
	case errors.Is(err, groupcommit.ErrOverloaded):
		return jobOutcome{alone: true}
	case err != nil:
		return jobOutcome{err: err}
	}
	return out
}

// flushGroup works a group and answers each of its jobs. A group that fails
// as a whole (its transaction broke, COMMIT failed) has committed nothing,
// and each of its events is worked again alone, so that one bad event fails
// only its own job. Events worked alone after a group are worked by their
// own Work, in parallel, each on a connection of the pool: the flusher goes
// back to groups. A group of one is worked alone by the flusher.
func (w *eventWorker) flushGroup(ctx context.Context, group []groupRequest) ([]groupcommit.Result[jobOutcome], error) {
	var outcomes []jobOutcome
	if len(group) == 1 {
		outcomes = []jobOutcome{w.process(group[0].Ctx, group[0].Item)}
	} else {
		var err error
		if outcomes, err = w.workGroup(ctx, group); err != nil {
			out := jobOutcome{alone: true}
			if errors.Is(err, errFenced) {
				out = jobOutcome{err: err}
			} else {
				w.logger.Info("group transaction failed; working its events one by one",
					zap.Int("events", len(group)), zap.Error(err))
			}
			outcomes = slices.Repeat([]jobOutcome{out}, len(group))
		}
	}
	results := make([]groupcommit.Result[jobOutcome], len(group))
	for i, out := range outcomes {
		results[i].Value = out
	}
	return results, nil
}

// workGroup works the group in one transaction and returns each job's
// outcome once it committed; alone for those to be worked alone.
//
// A group holds the row locks its handlers took until it commits, and
// handlers that update hot rows (a balance, a counter, an order's state)
// take them in an order no one controls: two groups each waiting for a row
// the other holds deadlock, and PostgreSQL breaks the cycle only after
// deadlock_timeout (1 s), one event at a time. So a group waits at most
// groupLockTimeoutDefault for another transaction's lock; the event that
// met the timeout (or a deadlock, or a serialization failure) is rolled
// back to its savepoint, the group ends there, and that event and the ones
// after it are worked alone once the group has committed and released its
// locks. A transaction of one event waits for locks as long as it must,
// as it would without groups.
//
// A slow event is treated the same way, so that it never spends its
// neighbours' time (the jobs of a group were fetched together, and share
// one deadline): an event's handlers get a slice of the job timeout
// (groupSliceDivisor), enforced by their context and by the group's
// statement_timeout, and the group takes no further event once less than
// half the job timeout and a slice are left. An event over its slice is
// rolled back to its savepoint, the group ends there and commits the events
// before it, and it and the rest are worked alone, with about half of their
// job's time: each begins its handlers only with at least a grouped event's
// time left, else it is put back uncharged and runs again with all of it
// (see eventWorker.late). The slow event meets its own timeout there, and
// the others commit at their first attempt.
//
// An event of a source paused since its job was fetched is held, and one
// fetched by a worker that has fenced itself (see registration.fenced) is
// put back untouched: neither begins its handlers. On error nothing
// committed.
func (w *eventWorker) workGroup(ctx context.Context, group []groupRequest) (outcomes []jobOutcome, err error) {
	order, ids, jobIDs := rowOrder(group)
	outcomes = make([]jobOutcome, len(group))
	// The spans of the events' handlers, ended once the transaction has.
	var spans groupSpans
	if w.tracer != nil {
		spans = make(groupSpans, len(group))
		defer func() { spans.end(err) }()
	}
	deadline, _ := ctx.Deadline()
	err = w.inTx(ctx, inboxstore.WorkTxOptions(w.asyncCommit), func(tx pgx.Tx) error {
		taken, err := w.store.Take(ctx, tx, ids, jobIDs, time.Time{})
		if err != nil {
			return err
		}
		g := &groupTx{tx: tx, savepoints: &groupSavepoints{tx: tx, settings: w.groupSettings}, deadline: deadline,
			outcomes: outcomes, spans: spans}
		for _, i := range order {
			job := group[i].Item.job
			t := taken[job.Args.InboxID]
			if t == nil || t.JobID != job.ID {
				// Done already, gone, or taken for this row's other job
				// in this group: never run the effect twice.
				continue
			}
			// Used once: a second copy of the same job in this group (one
			// River rescued while the first still waited) finds nothing.
			delete(taken, job.Args.InboxID)
			if err := w.workGrouped(ctx, g, group[i], i, t); err != nil {
				return err
			}
		}
		return w.putBack(ctx, g, group)
	})
	if err != nil {
		return nil, err
	}
	return outcomes, nil
}

// rowOrder is the order a group's events are worked in, row order (the
// order the take locks them in), as indexes of group, and the rows' and
// jobs' ids in that order.
func rowOrder(group []groupRequest) (order []int, ids, jobIDs []int64) {
	order = make([]int, len(group))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Compare(group[a].Item.job.Args.InboxID, group[b].Item.job.Args.InboxID)
	})
	ids, jobIDs = make([]int64, len(group)), make([]int64, len(group))
	for k, i := range order {
		ids[k], jobIDs[k] = group[i].Item.job.Args.InboxID, group[i].Item.job.ID
	}
	return order, ids, jobIDs
}

// groupTx is a group transaction's state while workGroup works its events
// one after the other.
type groupTx struct {
	tx         pgx.Tx
	savepoints *groupSavepoints
	// deadline is the group's: the earliest of its jobs'.
	deadline time.Time
	// outcomes are the events' outcomes, by index of the group.
	outcomes []jobOutcome
	spans    groupSpans
	// undo are the taken rows put back as they were before the commit
	// (Store.UndoTakes, one statement).
	undo []*inboxstore.Taken
	// held are the indexes of the events whose source is paused, held
	// before the commit.
	held []int
	// ended: at a lock conflict or a slow event, the group takes no
	// further event; the rest is worked alone.
	ended bool
}

// workGrouped works event i of the group, req, whose row the group took
// (t), in g: its handlers run behind a savepoint of their own, within
// their slice of the group's time. A failure is rolled back to the
// savepoint and recorded on the row in the group's transaction; a slow
// event, or one that met another transaction's locks, ends the group, and
// it and the rest are handed over to be worked alone. An error ends the
// group's transaction: nothing commits.
func (w *eventWorker) workGrouped(ctx context.Context, g *groupTx, req groupRequest, i int, t *inboxstore.Taken) error {
	job := req.Item.job
	// A further event only while its whole slice ends before the
	// half of the job's time the events worked alone keep: cut
	// short by that bound, its statement would be cancelled by its
	// context, not by statement_timeout, and the connection (the
	// group's transaction) with it.
	g.ended = g.ended || (!g.deadline.IsZero() && time.Until(g.deadline) < w.jobTimeout/2+w.sliceBound())
	switch {
	case g.ended:
		g.undo = append(g.undo, t)
		g.outcomes[i].alone = true
		return nil
	case w.registration.fenced():
		g.undo = append(g.undo, t)
		g.outcomes[i].err = errFenced
		return nil
	case w.pauses.isPaused(job.Args.Source):
		g.undo = append(g.undo, t)
		g.held = append(g.held, i)
		return nil
	}
	// The event's savepoint is made with its handlers' first
	// statement (see eventTx).
	etx := g.savepoints.newEventTx()
	hctx := ctx
	if g.spans != nil {
		// The event's span is its job's child, in the group's
		// transaction.
		hctx, g.spans[i].span = w.startHandle(ctx, req.Ctx, job)
	}
	hctx, cancel := w.eventSlice(hctx, g.deadline)
	began := time.Now()
	herr := w.runHandlers(hctx, etx, t.Event, w.routeFor(req.Item, t.Event))
	slow := hctx.Err() != nil || inboxstore.ClassifyPg(herr) == inboxstore.PgCanceled
	cancel()
	g.outcomes[i].began = true
	g.spans.record(i, herr)
	if g.savepoints.err != nil {
		return g.savepoints.err
	}
	if herr == nil {
		return nil
	}
	if ctx.Err() != nil {
		return herr
	}
	if err := etx.rollback(ctx); err != nil {
		// The handlers' failure broke the group's transaction: a
		// statement cut by its context, not by statement_timeout,
		// closes the connection. How long the event ran against its
		// slice says which: past the slice, the machine was too
		// busy for statement_timeout to cancel first; within it,
		// the group took an event it had no slice left for.
		return fmt.Errorf("event %d ran %s of its %s slice and failed (%w): %w", job.Args.InboxID,
			time.Since(began).Round(time.Millisecond), w.jobTimeout/groupSliceDivisor, herr, err)
	}
	if slow || inboxstore.ClassifyPg(herr).Contended() {
		// The row's done mark is rolled back below with those of
		// the events after it; all are worked alone once this
		// group has committed and released its locks.
		if slow {
			w.logger.Info("event ran past its slice of the group's time; it and the rest of its group are worked alone",
				zap.Int64("inbox_id", job.Args.InboxID), zap.Duration("slice", w.jobTimeout/groupSliceDivisor))
		}
		g.undo = append(g.undo, t)
		g.outcomes[i].alone = true
		g.ended = true
		return nil
	}
	// The failure is recorded in the group's transaction; reportResult
	// settles the rest of it in the event's own Work.
	final := failsForGood(job, herr)
	if err := w.store.UndoTakes(ctx, g.tx, []*inboxstore.Taken{t}, []*inboxstore.TakeFailure{{Reason: herr.Error(), Final: final}}, time.Time{}); err != nil {
		return err
	}
	g.outcomes[i] = jobOutcome{err: herr, recorded: true, began: true}
	return nil
}

// putBack, before the group commits, puts back the rows of the events the
// group did not work, as they were, and holds those of paused sources.
func (w *eventWorker) putBack(ctx context.Context, g *groupTx, group []groupRequest) error {
	if err := w.store.UndoTakes(ctx, g.tx, g.undo, nil, time.Time{}); err != nil {
		return err
	}
	for _, i := range g.held {
		args := group[i].Item.job.Args
		ok, err := w.store.Hold(ctx, g.tx, args.InboxID, args.Source)
		if err != nil {
			return err
		}
		// Not held: the source was resumed meanwhile.
		g.outcomes[i] = jobOutcome{held: ok, alone: !ok}
	}
	return nil
}

// eventSlice bounds a grouped event's handlers: a slice of the job timeout
// (groupSliceDivisor), and half again for the group's statement_timeout
// (the same slice) to cancel a statement first, which keeps the
// connection; and at most until half the job timeout is left of the
// group's deadline.
func (w *eventWorker) eventSlice(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	until := time.Now().Add(w.sliceBound())
	if !deadline.IsZero() {
		if last := deadline.Add(-w.jobTimeout / 2); last.Before(until) {
			until = last
		}
	}
	return context.WithDeadline(ctx, until)
}

// sliceBound is how long a grouped event's handlers may run: its slice of
// the job timeout, and half again for statement_timeout to cancel first.
func (w *eventWorker) sliceBound() time.Duration {
	slice := w.jobTimeout / groupSliceDivisor
	return slice + slice/2
}

// groupSettings are the SET LOCAL statements of a group transaction, run
// with its first savepoint: its lock_timeout (see workGroup) and its
// statement_timeout, an event's slice of the job timeout.
func groupSettings(jobTimeout time.Duration) []string {
	return []string{
		fmt.Sprintf("SET LOCAL lock_timeout = %d", groupLockTimeoutDefault.Milliseconds()),
		fmt.Sprintf("SET LOCAL statement_timeout = %d", max(1, (jobTimeout/groupSliceDivisor).Milliseconds())),
	}
}
