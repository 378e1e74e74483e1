package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
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
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

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

// Work processes one event. A crash anywhere before the commit leaves no
// effect: the row stays as it was and River runs the job again.
func (w *eventWorker) Work(ctx context.Context, job *river.Job[inboxstore.JobArgs]) error {
	start := time.Now()
	if w.registration.fenced() {
		return river.JobSnooze(fencedSnooze)
	}
	if w.pauses != nil && w.pauses.isPaused(job.Args.Source) {
		// The row is left pending with no job; Resume enqueues it again.
		// The job completes: no attempt of the event is spent.
		held, err := w.store.Hold(ctx, w.pool, job.Args.InboxID, job.Args.Source)
		if err != nil {
			return err
		}
		if held {
			w.logHeld(job)
			return nil
		}
	}
	if _, known := w.sources[job.Args.Source]; !known && job.Args.Source != "" && time.Since(job.CreatedAt) < unknownSourceGrace {
		w.logger.Debug("event snoozed: its source is not in this worker's configuration (a newer one may be rolling out)",
			zap.Int64("inbox_id", job.Args.InboxID), zap.String("source", job.Args.Source), zap.Int64("job_id", job.ID))
		return river.JobSnooze(unknownSourceSnooze)
	}
	w.alignAttempts(ctx, job.JobRow)
	var (
		out   jobOutcome
		woken *inboxstore.ClaimedRow
	)
	snoozed := snoozes(job.JobRow)
	if w.group != nil && !w.ownTransaction(job.Args.Source, job.Args.EventType) && snoozed == 0 {
		out = w.inGroup(ctx, job)
		if out.alone {
			_, out = w.process(ctx, job)
		}
	} else {
		woken, out = w.process(ctx, job)
	}
	err := out.err
	switch {
	case out.held:
		w.logHeld(job)
		return nil
	case errors.Is(err, errFenced):
		return river.JobSnooze(fencedSnooze)
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
		w.metrics.Event(job.Args.Source, metrics.OutcomeDone, time.Since(start), time.Since(job.CreatedAt))
		w.runInline(ctx, job, woken, start)
		return nil
	}
	log := w.logger.With(zap.Int64("inbox_id", job.Args.InboxID), zap.Int64("job_id", job.ID),
		zap.String("request_id", job.Args.RequestID), zap.Int("attempt", job.Attempt), zap.Int("max_attempts", job.MaxAttempts))
	if errors.Is(ctx.Err(), context.Canceled) {
		// The worker is stopping: River makes the job available again
		// without counting the attempt, so neither do we.
		log.Info("event interrupted by shutdown", zap.Error(err))
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
	if out.began && out.short && !out.recorded && errors.Is(ctx.Err(), context.DeadlineExceeded) && snoozed < shortRunsUncharged {
		// Its handlers began with less than the job's time (a group spent
		// some, or it waited for a transaction) and used it up: the time
		// its neighbours took is not its fault. Snoozed, it runs again
		// alone (see snoozes), with all of its time.
		log.Info("event's time ran out, its handlers having begun with less than all of it; running it again alone, no attempt counted", zap.Error(err))
		return river.JobSnooze(0)
	}

	permanent := inbox.IsPermanent(err)
	final := permanent || job.Attempt >= job.MaxAttempts
	// The handler's transaction rolled back; the failure is recorded in a
	// small transaction of its own, with a context the job's deadline can't
	// cancel. If this write is lost too, the reaper reconciles the row with
	// the job's final state.
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// A failure in a group was recorded in the group's transaction.
	if !out.recorded {
		var recErr error
		if seqErr := (*sequenceError)(nil); errors.As(err, &seqErr) {
			recErr = w.recordSequenceFailure(recordCtx, seqErr, job.ID, final)
		} else {
			recErr = w.store.RecordFailure(recordCtx, w.pool, job.Args.InboxID, job.ID, err.Error(), final, time.Time{})
		}
		if recErr != nil {
			log.Error("could not record the failure on the inbox row", zap.Error(recErr))
		}
	}
	outcome := metrics.OutcomeRetried
	if final {
		outcome = metrics.OutcomeFailed
	}
	w.metrics.Event(job.Args.Source, outcome, time.Since(start), 0)
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

// errLate is what process returns when its transaction began with less
// time left than a grouped event gets (see late).
var errLate = errors.New("less than a grouped event's time was left when its transaction began")

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
// (see Work); a run that began with about all of its time and still ran
// out is.
func (w *eventWorker) short(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && w.jobTimeout > 0 && time.Until(deadline) < w.jobTimeout-w.jobTimeout/20
}

// snoozes is how many times job was snoozed (River counts them in its
// metadata). A job snoozed before is worked alone, not in a group, so that
// an event put back for want of time gets all of it.
func snoozes(job *rivertype.JobRow) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	if json.Unmarshal(job.Metadata, &meta) != nil {
		return 0
	}
	return meta.Snoozes
}

// shortRunsUncharged is how many times a job may be put back uncharged
// for running out of a time it did not have (see Work): an event that
// never gets a transaction with all of its time (the worker stays
// contended) is then charged, so that one whose handlers hang still ends
// failed after max_attempts.
const shortRunsUncharged = 3

// process works one event in a transaction of its own, at its route's
// isolation level, behind its route's gates (see inOwnTransaction and
// runGated). A sequenced route's event goes through enterSequence first,
// before its row is taken: parked, the transaction commits the park alone
// and process returns errParked. Outside a group it takes no permit of
// w.limit: an event worked alone may wait on a lock for as long as it
// must, and must not hold back the others meanwhile. An event of a paused
// source is held instead, and a fenced worker begins nothing (errFenced).
//
// It returns the event that the run woke, if any (see runInline).
func (w *eventWorker) process(ctx context.Context, job *river.Job[inboxstore.JobArgs]) (woken *inboxstore.ClaimedRow, out jobOutcome) {
	skipped, parked := false, false
	var err error
	if w.tracer != nil {
		var span trace.Span
		ctx, span = w.startHandle(ctx, ctx, job)
		defer func() { endHandle(span, processOutcome(err, skipped), err) }()
	}
	seq := w.sequenceFor(job.Args.Source, job.Args.EventType)
	var gate *sequenceGate
	err = w.inOwnTransaction(ctx, job, func(tx pgx.Tx) error {
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
		if seq != nil {
			pos, err := w.enterSequence(ctx, tx, job.Args.InboxID, seq)
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
		return w.runGated(ctx, handlerTx{tx}, t.Event, gate)
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
		woken = gate.woken
	}
	return woken, out
}

// logHeld logs an event held because its source is paused.
func (w *eventWorker) logHeld(job *river.Job[inboxstore.JobArgs]) {
	w.logger.Debug("event held: its source is paused", zap.Int64("inbox_id", job.Args.InboxID),
		zap.String("source", job.Args.Source), zap.Int64("job_id", job.ID))
}

// runHandlers runs the handlers of the first route matching ev in tx, or
// settles an unrouted event.
func (w *eventWorker) runHandlers(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
	// A failed row is processed again: retrying its job from River UI
	// is how an operator replays it.
	route, ok := w.router.matchRoute(ev.Source, ev.EventType)
	if !ok {
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
