package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/limiter"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// This file is an event's path, top to bottom: River's Work, the route
// resolved once (newRun), the checks before anything runs (execute), the
// event worked in a transaction of its own (process: the take, the gates,
// the handlers, the commit in inTx) or handed to a group (inGroup, see
// group.go), and the one place that turns the outcome into River's answer
// and the row's record (reportResult). River's producer and executor are
// the model: the worker is looked up once and handed down; execute runs
// the work and reportResult settles it.

// noteUnrouted is recorded on an event that no route matched.
const noteUnrouted = "no route matched; marked done without running a handler"

// An event of a source this worker's configuration does not name comes from
// a receiver with a newer configuration: during a rollout that adds a source,
// the receivers may take its events before the workers with its routes take
// over the queue (see Worker.rollout). Such an event is snoozed, not settled, for
// unknownSourceGrace after it was enqueued; past it, the unrouted rule
// settles it as before, so that a source no worker will ever know does not
// stay pending for ever.
const (
	unknownSourceGrace  = 15 * time.Minute
	unknownSourceSnooze = 5 * time.Second
)

// eventWorker works inboxstore.JobArgs: the event's row is taken (locked and
// marked done) and its route's handlers run in a transaction that commits
// both, shared with the other jobs fetched with it (see groupCommitter).
// The job itself is completed by River's batched completer once Work
// returns: a job run again finds its row done and does nothing.
type eventWorker struct {
	river.WorkerDefaults[inboxstore.JobArgs]

	pool         *pgxpool.Pool
	store        *inboxstore.Store
	router       *router
	failUnrouted bool
	asyncCommit  bool
	// isolation is the level of a route that chooses none.
	isolation Isolation
	logger    *zap.Logger
	metrics   *metrics.Worker
	// group, when set, works events in group transactions; without it each
	// event has a transaction of its own.
	group *groupCommitter
	// limit bounds the group transactions run at once (see inTx); nil
	// without group.
	limit *limiter.Limiter
	// pauses is the worker's view of the paused sources.
	pauses *pauseWatch
	// sources is Config.Sources: the sources this worker knows.
	sources map[string]string
	// tracer traces each event's handlers; nil when tracing is off.
	tracer trace.Tracer
	// queueFor is Config.QueueFor: the queue of a source's jobs.
	queueFor func(string) string
	// stopping is set once the Worker stops River's client: a run River
	// cancels before that was cut by a start of River's that failed after
	// another queue's producer began (see reportResult).
	stopping *atomic.Bool
	// maxAttempts is Config.MaxAttempts, which every job of an event is
	// aligned to before it runs (see alignAttempts).
	maxAttempts int
	// jobTimeout is Config.JobTimeout, which a group shares out among its
	// events (see workGroup).
	jobTimeout time.Duration
	// groupSettings are a group transaction's SET LOCAL statements.
	groupSettings []string
	// registration is the worker's routes record, which fences the worker
	// when it cannot be renewed (see registration.fenced).
	registration *registration
	// slots bound the event transactions open at once, a group's or an
	// event's own, to the connections the pool has for them (see inTx).
	slots chan struct{}
}

// errFenced is the outcome of an event that was not begun because the
// worker fenced itself: its job is snoozed, and a worker whose record is
// live works it.
var errFenced = errors.New("worker: fenced: its routes record could not be renewed; the event is left for a live worker")

// fencedSnooze is how long a job a fenced worker put back waits.
const fencedSnooze = time.Second

// errUnknownSource is the outcome of an event whose source this worker's
// configuration does not name, within unknownSourceGrace of its enqueue:
// its job is snoozed for unknownSourceSnooze.
var errUnknownSource = errors.New("worker: the event's source is not in this worker's configuration")

// eventRun is one run of an event's job. Its route is resolved once, when
// the run begins, from the job's source and type, and handed down to every
// step: whether the event may join a group, its transaction's isolation,
// its sequence, its lock and its handlers.
type eventRun struct {
	job *river.Job[inboxstore.JobArgs]
	// start is when the run began: what the metrics time, and what the
	// inline runs of a sequence's woken events count their budget from.
	start time.Time
	// route is the first route matching the job's source and type; nil
	// when none does.
	route *compiledRoute
	// alone: the route's events need a transaction of their own, never a
	// group's (an isolation level, a lock or a sequence; or the worker's
	// isolation is not the default). An unrouted event may join a group.
	alone bool
	// isolation is the level of the event's own transaction.
	isolation Isolation
	// sequence is the route's sequence option; nil when it has none.
	sequence *SequenceOption
	// snoozes is how many times River snoozed the job, its put-backs
	// aside (see snoozes).
	snoozes int
	// putBacks is how many times the job was put back for want of the
	// database (see uncounted).
	putBacks int
	// startCuts is how many of its runs River's failed starts cut (see
	// reportResult).
	startCuts int
}

// newRun resolves job's route, once for the whole run (the one look-up of
// the router on an event's path; see routeFor for the one exception).
func (w *eventWorker) newRun(job *river.Job[inboxstore.JobArgs], start time.Time) *eventRun {
	run := &eventRun{job: job, start: start, isolation: w.isolation}
	run.snoozes, run.putBacks, run.startCuts = snoozes(job.JobRow)
	if route, ok := w.router.matchRoute(job.Args.Source, job.Args.EventType); ok {
		run.route = route
		run.alone = route.route.ownTransaction() || w.isolation != isolationDefault
		run.isolation = cmp.Or(route.route.Isolation, w.isolation)
		run.sequence = route.route.Sequence
	}
	return run
}

// routeFor is the route whose handlers run for ev, the event as its taken
// row holds it: run's, when the row's source and type are the job's, as
// they are for every job the product enqueues. The row is authoritative,
// so a job whose arguments lack them (one enqueued by hand, or by the
// benchmark's preload, without the type) has its route looked up again
// from the row, as it always was.
func (w *eventWorker) routeFor(run *eventRun, ev *inbox.Event) *compiledRoute {
	if ev.Source == run.job.Args.Source && ev.EventType == run.job.Args.EventType {
		return run.route
	}
	route, _ := w.router.matchRoute(ev.Source, ev.EventType)
	return route
}

// Work processes one event: execute runs it, reportResult settles it, and
// a sequenced event's run then runs the events of its key it woke
// (runInline). A crash anywhere before the commit leaves no effect: the
// row stays as it was and River runs the job again.
func (w *eventWorker) Work(ctx context.Context, job *river.Job[inboxstore.JobArgs]) error {
	run := w.newRun(job, time.Now())
	out := w.execute(ctx, run)
	err := w.reportResult(ctx, run, out)
	if err == nil && out.err == nil && out.woken != nil {
		w.runInline(ctx, run, out.woken)
	}
	return err
}

// execute checks what may keep the event from running at all (a fenced
// worker, a paused source, a source this worker does not know), aligns
// the job's attempts, and works the event: in a group transaction when its
// route allows one and its job was never snoozed (a job snoozed before is
// worked alone, so that an event put back for want of time gets all of
// it), else, or when its group hands it over, in a transaction of its own.
func (w *eventWorker) execute(ctx context.Context, run *eventRun) jobOutcome {
	job := run.job
	if w.registration.fenced() {
		return jobOutcome{err: errFenced}
	}
	if w.pauses != nil && w.pauses.isPaused(job.Args.Source) {
		// The row is left pending with no job; Resume enqueues it again.
		// The job completes: no attempt of the event is spent.
		held, err := w.store.Hold(ctx, w.pool, job.Args.InboxID, job.Args.Source)
		if err != nil {
			return jobOutcome{err: err, unsettled: true}
		}
		if held {
			return jobOutcome{held: true}
		}
	}
	if _, known := w.sources[job.Args.Source]; !known && job.Args.Source != "" && time.Since(job.CreatedAt) < unknownSourceGrace {
		return jobOutcome{err: errUnknownSource}
	}
	w.alignAttempts(ctx, job.JobRow)
	if w.group != nil && !run.alone && run.snoozes == 0 {
		if out := w.inGroup(ctx, run); !out.alone {
			return out
		}
	}
	return w.process(ctx, run)
}

// errLate is what process returns when its transaction began with less
// time left than a grouped event gets (see late).
var errLate = errors.New("less than a grouped event's time was left when its transaction began")

// process works one event in a transaction of its own, at its route's
// isolation level, behind its route's gates (see inOwnTransaction and
// runGated). A sequenced route's event goes through enterSequence first,
// before its row is taken: parked, the transaction commits the park alone
// and process returns errParked. Outside a group it takes no permit of
// w.limit: an event worked alone may wait on a lock for as long as it
// must, and must not hold back the others meanwhile. An event of a paused
// source is held instead, and a fenced worker begins nothing (errFenced).
//
// Its outcome carries the event that the run woke, if any (see runInline).
func (w *eventWorker) process(ctx context.Context, run *eventRun) (out jobOutcome) {
	job := run.job
	skipped, parked := false, false
	var err error
	if w.tracer != nil {
		var span trace.Span
		ctx, span = w.startHandle(ctx, ctx, job)
		defer func() { endHandle(span, processOutcome(err, skipped), err) }()
	}
	var gate *sequenceGate
	err = w.inOwnTransaction(ctx, run, func(tx pgx.Tx) error {
		skipped, parked, gate, out = false, false, nil, jobOutcome{}
		if w.registration.fenced() {
			return errFenced
		}
		if w.pauses != nil && w.pauses.isPaused(job.Args.Source) {
			held, err := w.store.Hold(ctx, tx, job.Args.InboxID, job.Args.Source)
			out.held = held
			if err != nil || held {
				return err
			}
		}
		if run.sequence != nil {
			pos, err := w.enterSequence(ctx, tx, job.Args.InboxID, run.sequence)
			gate = &sequenceGate{pos: pos}
			switch {
			case errors.Is(err, errParked):
				parked = true
				return nil
			case errors.Is(err, inbox.ErrNotFound):
				skipped = true
				return nil
			case err != nil:
				return err
			}
		}
		if w.late(ctx) {
			return errLate
		}
		// One round trip locks the row, checks it, and marks it done; the
		// handlers' failure rolls the mark back with everything else.
		taken, err := w.store.Take(ctx, tx, []int64{job.Args.InboxID}, []int64{job.ID}, time.Time{})
		t := taken[job.Args.InboxID]
		skipped = err == nil && t == nil
		if skipped {
			// Done already (a stray job, or a retry of a job whose commit
			// landed), or pruned: never run the effect twice. River
			// completes the job.
			return nil
		}
		if err != nil {
			return err
		}
		out.began, out.short = true, w.short(ctx)
		return w.runGated(ctx, handlerTx{tx}, t.Event, w.routeFor(run, t.Event), gate)
	})
	// A hold counts only once committed.
	out.held = out.held && err == nil
	switch {
	case err == nil && parked:
		out.err = errParked
	case err != nil && gate != nil && gate.pos != nil && !isSnooze(err):
		out.err = &sequenceError{pos: gate.pos, err: err}
	case err != nil || gate == nil:
		out.err = err
	default:
		out.woken = gate.woken
	}
	return out
}

// inOwnTransaction runs fn in a transaction of the route's isolation level,
// and runs it again, after a short backoff, when it fails with a
// serialization failure (40001) or a deadlock (40P01), up to
// serializationRetriesDefault times (inboxstore.RetryConflicts, the one
// retry policy). Those runs roll back before the event's row is marked, so
// they spend none of its attempts.
func (w *eventWorker) inOwnTransaction(ctx context.Context, run *eventRun, fn func(pgx.Tx) error) error {
	opts := txOptions(w.asyncCommit, run.isolation)
	return inboxstore.RetryConflicts(ctx, serializationRetriesDefault+1, func() error { return w.inTx(ctx, opts, fn) },
		func(retry int, backoff time.Duration, err error) {
			w.logger.Debug("transaction conflict; running it again", zap.Int64("inbox_id", run.job.Args.InboxID),
				zap.Int("retry", retry), zap.Duration("backoff", backoff), zap.Error(err))
		})
}

// late reports whether less is left of ctx than a grouped event's handlers
// get (sliceBound): an event alone begins its handlers only with at least
// that much. Its time is its own: a run that waited for a transaction (the
// worker's are bounded, and slow events may hold them until their own time
// is up) is put back uncharged rather than run out of time its neighbours
// spent. An event a group handed over to be worked alone has about half
// the job's time left, well above that bound (see workGroup): a higher
// bound would put it back at every run, and a slow event that a group
// takes at each run would never run alone.
func (w *eventWorker) late(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && w.jobTimeout > 0 && time.Until(deadline) < w.sliceBound()
}

// short reports whether the run lost more than a twentieth of the job's
// time before its handlers began: it waited for a transaction, or a group
// spent it. Handlers that begin so and run out of time are not charged
// (see reportResult); a run that began with about all of its time and
// still ran out is.
func (w *eventWorker) short(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && w.jobTimeout > 0 && time.Until(deadline) < w.jobTimeout-w.jobTimeout/20
}

// runGated runs ev's route in tx, behind the route's lock gate; a
// sequenced route's event comes with the position enterSequence let it
// through at, before its row was taken. A lock that cannot let the event
// through now returns a river.JobSnooze error: the transaction rolls back
// (the row's take with it), and River runs the job again later without
// counting an attempt. route is nil for an unrouted event.
func (w *eventWorker) runGated(ctx context.Context, tx pgx.Tx, ev *inbox.Event, route *compiledRoute, gate *sequenceGate) error {
	if route == nil {
		return w.runHandlers(ctx, tx, ev, nil)
	}
	if lock := route.route.Lock; lock != nil {
		key, err := effect.Locate(lock.Key, ev)
		if err != nil {
			return inbox.Permanent(fmt.Errorf("lock key (%s): %w", lock.Key, err))
		}
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, advisoryKey(ev.Source, key)).Scan(&locked); err != nil {
			return fmt.Errorf("advisory lock: %w", err)
		}
		if !locked {
			w.logger.Debug("lock busy; event snoozed", zap.Int64("inbox_id", ev.ID), zap.String("lock_key", key))
			return river.JobSnooze(lock.Snooze)
		}
	}
	if route.route.Sequence != nil {
		return w.runSequenced(ctx, tx, ev, route, gate)
	}
	return w.runHandlers(ctx, tx, ev, route)
}

// runHandlers runs route's handlers for ev in tx, or settles an unrouted
// event (route nil). It is where both paths, a group's and an event's own,
// run the handlers.
func (w *eventWorker) runHandlers(ctx context.Context, tx pgx.Tx, ev *inbox.Event, route *compiledRoute) error {
	// A failed row is processed again: retrying its job from River UI
	// is how an operator replays it.
	if route == nil {
		if w.failUnrouted {
			return inbox.Permanent(fmt.Errorf("no route matches source %q, type %q", ev.Source, ev.EventType))
		}
		return w.store.SetNote(ctx, tx, ev.ID, noteUnrouted)
	}
	if len(route.route.Filter) > 0 {
		ok, err := matchesFilter(route.route.Filter, ev)
		if err != nil {
			return inbox.Permanent(err)
		}
		if !ok {
			return w.store.SetNote(ctx, tx, ev.ID, noteFiltered)
		}
	}
	ctx = withRoute(ctx, route.route)
	for _, h := range route.handlers {
		if err := callHandler(ctx, h, tx, *ev); err != nil {
			return err
		}
	}
	return nil
}

// callHandler turns a handler's panic into an error, so that it is counted
// and recorded like any failure.
func callHandler(ctx context.Context, h Handler, tx pgx.Tx, ev inbox.Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, tx, ev)
}

// inTx is pgx.BeginTxFunc on w.pool, and it reports how long the COMMIT
// took to the limiter of the group transactions: a COMMIT that does not
// wait for the WAL flush costs the database about the same whatever the
// transaction did, so its latency measures how busy the database is, not
// how big the group was (with synchronous_commit it also waits for the WAL
// flush, which the receivers' commits wait for too). A sample says whether
// jobs wait for a flusher, the demand that lets the limit grow.
//
// Every event transaction, a group's or an event's own, takes one of
// w.slots first, without a connection: they bound the event transactions
// open at once to the connections the pool has for them, so that no number
// of jobs in flight can take the connections River and the rollout need. A
// worker that fenced itself meanwhile (see registration.fenced) rolls back
// instead of committing, with errFenced.
func (w *eventWorker) inTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	select {
	case w.slots <- struct{}{}:
		defer func() { <-w.slots }()
	case <-ctx.Done():
		return ctx.Err()
	}
	tx, err := w.pool.BeginTx(ctx, opts)
	if err != nil {
		return lostDatabase(ctx, err, true)
	}
	// After a COMMIT, a no-op; a failed ROLLBACK closes the connection.
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return lostDatabase(ctx, err, tx.Conn().IsClosed())
	}
	if w.registration.fenced() {
		return errFenced
	}
	start := time.Now()
	if err := tx.Commit(ctx); err != nil {
		return lostDatabase(ctx, err, tx.Conn().IsClosed())
	}
	if w.limit != nil {
		w.limit.Observe(time.Since(start), w.group.Waiting() > 0)
		w.metrics.TransactionLimit(w.limit.Limit())
	}
	return nil
}

// lostDatabaseError is the failure of a run that lost the inbox's
// database: its transaction could not begin (no connection could be had)
// or its connection broke under it (PostgreSQL restarting or failing
// over, a backend terminated). Nothing of the run committed, and the
// failure is not the event's: reportResult puts the run back uncharged.
type lostDatabaseError struct{ error }

func (e lostDatabaseError) Unwrap() error { return e.error }

// lostDatabase returns err as a lostDatabaseError when it says the
// database was lost (inboxstore.Unavailable) and the run's own
// connection is gone (closed): a handler's error that merely quotes a
// network failure of its own (a downstream API, a database of its own)
// leaves the transaction's connection open, and is the handler's. A
// context that ended is the run's time, not the database: err as it is.
func lostDatabase(ctx context.Context, err error, closed bool) error {
	if closed && ctx.Err() == nil && inboxstore.Unavailable(err) {
		return lostDatabaseError{err}
	}
	return err
}

// jobOutcome is what became of an event's run, as execute hands it to
// reportResult: err, and what the run knows of it.
type jobOutcome struct {
	err error
	// recorded: the failure was recorded on the row already, in the
	// group's transaction (see workGroup).
	recorded bool
	// alone: the group handed the event over, to be worked in a
	// transaction of its own (inGroup's caller does so at once).
	alone bool
	// began: the event's handlers began in this run. A run that ends in an
	// error before they began (its job's time ran out while it waited for
	// a transaction) charges the event no attempt.
	began bool
	// short: its handlers began with less than about all of the job's
	// time left (see eventWorker.short).
	short bool
	// held: the event's source was paused before its handlers began, and
	// its row is held for Resume.
	held bool
	// unsettled: err came before the run (the pause check's own Hold
	// failed): nothing is recorded or counted, and the run is put back
	// uncharged, like any run whose handlers never began.
	unsettled bool
	// woken is the event of the same sequence key that the run woke, if
	// any (see runInline).
	woken *inboxstore.ClaimedRow
}

// reportResult is the one place an event's outcome is settled, whichever
// path the event took (River's executor's reportResult is the model): it
// turns the outcome into what Work returns to River (nil: done, parked or
// held; a snooze: deferred, uncharged; the error: retried or failed for
// good, charged), records a failure on the row (unless the group's
// transaction did, with the group's commit), counts the outcome in the
// metrics, and logs it.
//
// River counts an attempt exactly when the row does: an error goes back to
// River only once its failure is recorded on the row (or the worker is
// stopping, which River does not count; or it was the event's last, which
// the reaper records if the worker could not). A run that failed for want
// of the database (it lost its connection, up to unchargedRuns times; or
// could not record the failure, or check the pause), or that a failed
// start of River's cancelled, is put back uncharged
// instead (see uncounted): were River to count it, a database that
// restarts or fails over now and then would grow the event's backoff past
// any deadline, and discard it after max_attempts with no failure of its
// own (the 30-minute soak, seed 303).
func (w *eventWorker) reportResult(ctx context.Context, run *eventRun, out jobOutcome) error {
	out.err = storable(out.err)
	job, err := run.job, out.err
	switch {
	case out.unsettled && ctx.Err() == nil:
		return w.uncounted(ctx, run, err, "its pause check failed")
	case out.held:
		w.logHeld(job)
		return nil
	case errors.Is(err, errFenced):
		return river.JobSnooze(fencedSnooze)
	case errors.Is(err, errUnknownSource):
		w.logger.Debug("event snoozed: its source is not in this worker's configuration (a newer one may be rolling out)",
			zap.Int64("inbox_id", job.Args.InboxID), zap.String("source", job.Args.Source), zap.Int64("job_id", job.ID))
		return river.JobSnooze(unknownSourceSnooze)
	case errors.Is(err, errParked):
		// Nothing ran and no attempt is spent: the job ends, and the run of
		// the event's key before it enqueues it again.
		w.logger.Debug("event parked: an event of its sequence key comes first", zap.Int64("inbox_id", job.Args.InboxID),
			zap.Int64("job_id", job.ID))
		return nil
	case isSnooze(err):
		// A gate (a lock, a sequence) deferred the event: nothing ran, and
		// River counts no attempt.
		return err
	case err == nil:
		w.metrics.Event(job.Args.Source, metrics.OutcomeDone, time.Since(run.start), time.Since(job.CreatedAt))
		return nil
	}
	log := w.logger.With(zap.Int64("inbox_id", job.Args.InboxID), zap.Int64("job_id", job.ID),
		zap.String("request_id", job.Args.RequestID), zap.Int("attempt", job.Attempt), zap.Int("max_attempts", job.MaxAttempts))
	if errors.Is(ctx.Err(), context.Canceled) && !out.recorded && !w.stopping.Load() {
		// River cancelled the run, though the worker is not stopping it:
		// its start failed (a queue's settings not written in time, a
		// dropped connection) after another queue's producer began, and
		// it cancels the work with the start's error, an attempt it counts
		// (it counts any cancel but its own stop's). The worker starts it
		// again (pkg/daemon), and the event runs again, uncharged, and
		// counted apart: the cut is the worker's, and spends none of the
		// event's put-backs for a lost connection (a helper's attack on
		// 6ee9dcb: three cuts, and the event's next lost connections were
		// charged until it failed for good).
		return w.snoozeUncharged(ctx, run, err, "River's start failed under it", startCutsKey, run.startCuts)
	}
	if errors.Is(ctx.Err(), context.Canceled) && !out.recorded {
		// The worker is stopping: River makes the job available again
		// without counting the attempt, so neither do we. River knows it
		// by the error, which must say so even when what failed (a
		// connection the cancel closed) does not. A failure the group's
		// transaction recorded is counted: it goes to River as it is.
		log.Info("event interrupted by shutdown", zap.Error(err))
		if !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return err
	}
	if !out.began && !out.recorded && (ctx.Err() != nil || errors.Is(err, errLate)) {
		// The job's time ran out, or most of it, while it waited for a
		// transaction (behind slow events, or for a connection): its
		// handlers never began, so the event is not charged an attempt.
		// River runs it again at once, with all its time.
		log.Info("event's time ran out before its handlers began; running it again, no attempt counted", zap.Error(err))
		return river.JobSnooze(0)
	}
	if out.began && out.short && !out.recorded && errors.Is(ctx.Err(), context.DeadlineExceeded) && run.snoozes < unchargedRuns {
		// Its handlers began with less than the job's time (a group spent
		// some, or it waited for a transaction) and used it up: the time
		// its neighbours took is not its fault. Snoozed, it runs again
		// alone (see snoozes), with all of its time.
		log.Info("event's time ran out, its handlers having begun with less than all of it; running it again alone, no attempt counted", zap.Error(err))
		return river.JobSnooze(0)
	}
	if errors.As(err, new(lostDatabaseError)) && run.putBacks < unchargedRuns {
		return w.uncounted(ctx, run, err, "it lost the database")
	}
	return w.charge(ctx, run, out, log)
}

// uncounted answers River for a run that failed for want of the database,
// with nothing recorded on its row: the job is snoozed (River counts no
// attempt) for uncountedWait, its put-backs counted in its metadata
// (putBacksKey), and the event runs again.
func (w *eventWorker) uncounted(ctx context.Context, run *eventRun, err error, why string) error {
	return w.snoozeUncharged(ctx, run, err, why, putBacksKey, run.putBacks)
}

// snoozeUncharged snoozes the job for uncountedWait(n), n the times it was put
// back before for the same cause, which metadata key counts.
func (w *eventWorker) snoozeUncharged(ctx context.Context, run *eventRun, err error, why, key string, n int) error {
	// Work's context always takes metadata (River merges it when the run
	// ends, a snooze included).
	_ = river.MetadataSet(ctx, key, n+1)
	wait := uncountedWait(n)
	w.logger.Warn("event put back, no attempt counted: "+why, zap.Int64("inbox_id", run.job.Args.InboxID),
		zap.Int64("job_id", run.job.ID), zap.Duration("wait", wait), zap.Error(err))
	return river.JobSnooze(wait)
}

// uncountedWait is how long a run put back for want of the database waits,
// by how many times its job was put back before: a second, doubling, at
// most uncountedWaitMax. River fetches nothing while the database is
// away; this spaces the runs of a database that comes and goes.
func uncountedWait(putBacks int) time.Duration {
	return min(time.Second<<min(putBacks, 6), uncountedWaitMax)
}

// uncountedWaitMax bounds uncountedWait.
const uncountedWaitMax = 30 * time.Second

// storable returns err, or, when its text is one PostgreSQL cannot store
// (inboxstore.Storable), err with that text made storable: River writes
// the text of what Work returns in the job's errors (jsonb), and a NUL
// there kept its completer from settling the job and every job beside it.
// errors.Is and errors.As still see err.
func storable(err error) error {
	if err == nil {
		return nil
	}
	if text := err.Error(); inboxstore.Storable(text) == text {
		return err
	}
	return storableError{err}
}

// storableError is an error whose text is made storable.
type storableError struct{ error }

func (e storableError) Error() string { return inboxstore.Storable(e.error.Error()) }
func (e storableError) Unwrap() error { return e.error }

// charge settles a failed run that is charged an attempt, for
// reportResult: the failure is recorded on the row (unless the group's
// transaction did), counted, and returned, for River to retry the job
// with backoff, discard it after its last attempt, or cancel it when the
// error is permanent. A failure that could not be recorded is not
// charged: the run is put back (see uncounted), unless it was the last.
func (w *eventWorker) charge(ctx context.Context, run *eventRun, out jobOutcome, log *zap.Logger) error {
	job, err := run.job, out.err
	permanent := inbox.IsPermanent(err)
	final := failsForGood(job, err)
	if !out.recorded {
		if recErr := w.recordFailure(ctx, run, err, final); recErr != nil {
			log.Error("could not record the failure on the inbox row", zap.NamedError("record_error", recErr), zap.Error(err))
			if !final {
				return w.uncounted(ctx, run, err, "its failure could not be recorded")
			}
			// A last failure goes to River, which ends the job; the
			// reaper records it on the row (see reaper.go). Put back, an
			// event whose failed mark landed unacknowledged would run
			// again.
		}
	}
	outcome := metrics.OutcomeRetried
	if final {
		outcome = metrics.OutcomeFailed
	}
	w.metrics.Event(job.Args.Source, outcome, time.Since(run.start), 0)
	switch {
	case permanent:
		log.Warn("event failed permanently", zap.Error(err))
		return river.JobCancel(err)
	case final:
		log.Warn("event failed after its last attempt", zap.Error(err))
	default:
		log.Info("event failed; River retries it with backoff", zap.Error(err))
	}
	return err
}

// failsForGood reports whether job's event fails for good with err: err is
// permanent, or this was its last attempt. A group's failures and an event
// worked alone decide it alike.
func failsForGood(job *river.Job[inboxstore.JobArgs], err error) bool {
	return inbox.IsPermanent(err) || job.Attempt >= job.MaxAttempts
}

// recordFailure records err on the event's row, final or not. The
// handler's transaction rolled back; the failure is recorded in a small
// transaction of its own, with a context the job's deadline can't cancel.
// When this write fails, the run is put back uncharged (see charge). A
// sequenced event's failure also wakes its key's next parked event
// (recordSequenceFailure).
func (w *eventWorker) recordFailure(ctx context.Context, run *eventRun, err error, final bool) error {
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if seqErr := (*sequenceError)(nil); errors.As(err, &seqErr) {
		return w.recordSequenceFailure(recordCtx, seqErr, run.job.ID, final)
	}
	return w.store.RecordFailure(recordCtx, w.pool, run.job.Args.InboxID, run.job.ID, err.Error(), final, time.Time{})
}

// snoozes is how many times job was snoozed (River counts them in its
// metadata), its put-backs for want of the database and its runs River's
// failed starts cut aside, and how many those were (putBacksKey,
// startCutsKey). A job snoozed before is worked alone, not in a group, so
// that an event put back for want of time gets all of it; one put back for
// want of the database, or cut by a start, joins groups as before, since
// neither says anything of its time.
func snoozes(job *rivertype.JobRow) (snoozes, putBacks, startCuts int) {
	var meta struct {
		Snoozes   int `json:"snoozes"`
		PutBacks  int `json:"hookinbox:put_backs"`
		StartCuts int `json:"hookinbox:start_cuts"`
	}
	if json.Unmarshal(job.Metadata, &meta) != nil {
		return 0, 0, 0
	}
	return max(meta.Snoozes-meta.PutBacks-meta.StartCuts, 0), meta.PutBacks, meta.StartCuts
}

// putBacksKey is the job's metadata key that counts its put-backs for want
// of the database (River UI shows it beside River's snoozes).
const putBacksKey = "hookinbox:put_backs"

// startCutsKey is the job's metadata key that counts its runs River's
// failed starts cut, which are put back without limit: the worker does
// nothing else until its start goes through.
const startCutsKey = "hookinbox:start_cuts"

// unchargedRuns is how many times a job may be put back uncharged for a
// failure that may or may not be its event's (see reportResult): running
// out of a time it did not have (counted by its snoozes), or losing its
// connection (by its put-backs). An event that
// never gets a transaction with all of its time (the worker stays
// contended), or whose run breaks its connection every time (a handler
// whose statement crashes its backend), is then charged, so that one
// whose handlers hang or crash still ends failed after max_attempts.
const unchargedRuns = 3

// logHeld logs an event held because its source is paused.
func (w *eventWorker) logHeld(job *river.Job[inboxstore.JobArgs]) {
	w.logger.Debug("event held: its source is paused", zap.Int64("inbox_id", job.Args.InboxID),
		zap.String("source", job.Args.Source), zap.Int64("job_id", job.ID))
}

// isSnooze reports whether err asks River to snooze the job.
func isSnooze(err error) bool {
	var snooze *rivertype.JobSnoozeError
	return errors.As(err, &snooze)
}

// txOptions are the options of an event's own transaction: its isolation
// level and, with asyncCommit, synchronous_commit off (see
// inboxstore.WorkTxOptions), in one round trip.
func txOptions(asyncCommit bool, iso Isolation) pgx.TxOptions {
	opts := inboxstore.WorkTxOptions(asyncCommit)
	if opts.BeginQuery == "" {
		opts.IsoLevel = iso.txIsoLevel()
		return opts
	}
	opts.BeginQuery = fmt.Sprintf("BEGIN ISOLATION LEVEL %s; SET LOCAL synchronous_commit = off", iso.txIsoLevel())
	return opts
}
