package worker

import (
	"context"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// State is where a Worker stands (see Worker.Start for the rollout of a
// route change).
type State int32

// The States of a Worker, in the order it passes them. A worker that found
// its queues free goes from StateNew to StateWorking; one that found other
// routes there passes StateWaiting first.
const (
	// StateNew is a worker not started yet.
	StateNew State = iota
	// StateWaiting is a worker that found a live worker with other routes
	// working one of its queues (or a newer one waiting there): it works
	// nothing, and takes over once no live worker with other routes works
	// its queues.
	StateWaiting
	// StateWorking is a worker that works its queues.
	StateWorking
	// StateDraining is a worker that saw a newer route set waiting on one
	// of its queues: its running jobs finish, it takes no new ones.
	StateDraining
	// StateRetired is a worker that drained and deleted its routes record:
	// it works nothing, and never will again, until it is stopped.
	StateRetired
	// StateStopped is a worker that Stop stopped.
	StateStopped
)

// String names the state ("waiting").
func (s State) String() string {
	switch s {
	case StateNew:
		return "new"
	case StateWaiting:
		return "waiting"
	case StateWorking:
		return "working"
	case StateDraining:
		return "draining"
	case StateRetired:
		return "retired"
	case StateStopped:
		return "stopped"
	}
	return "unknown"
}

const (
	// rolloutPollDefault is how often a waiting worker tries to take over,
	// and a working one looks for a newer route set waiting, when
	// Config.HeartbeatInterval is longer: a route change completes within a
	// couple of it, plus the time the old workers' running jobs take.
	rolloutPollDefault = time.Second
	// waitingLogEvery is how often a worker still waiting says so again.
	waitingLogEvery = time.Minute
	// drainHardStop is how long a draining worker, once SoftStopTimeout is
	// spent and its running jobs are cancelled, waits for them to return.
	drainHardStop = 10 * time.Second
)

// State returns where the worker stands. Only StateWorking works jobs: a
// readiness check answers ready in that state alone.
func (w *Worker) State() State { return State(w.state.Load()) }

func (w *Worker) setState(s State) { w.state.Store(int32(s)) }

// rollout is the loop Start runs once it has claimed the worker's queues,
// until Stop or retirement: it renews the routes record every
// HeartbeatInterval and, every rolloutPollDefault, takes over when waiting, or
// drains when a newer route set waits.
func (w *Worker) rollout(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	interval := w.registration.interval
	poll := time.NewTicker(min(rolloutPollDefault, interval))
	defer poll.Stop()
	renew := time.NewTicker(interval)
	defer renew.Stop()
	var drained <-chan bool // set while draining: receives whether the drain completed
	for {
		select {
		case <-stop:
			return
		case ok := <-drained:
			w.retire(ctx, ok)
			return
		case <-renew.C:
			// In every state, a stopping one included: the record lives
			// until Stop's jobs have returned and Stop deletes it.
			if ch := w.renew(ctx); ch != nil {
				drained = ch
			}
			w.logFence()
		case <-poll.C:
			switch w.State() {
			case StateWaiting:
				w.tryTakeOver(ctx)
			case StateWorking:
				if ch := w.yieldToNewer(ctx); ch != nil {
					drained = ch
				}
			}
		}
	}
}

// waiting logs why the worker waits: at once when the worker that makes it
// wait changes, and every waitingLogEvery while it does not.
func (w *Worker) waiting(o *otherWorker) {
	key := o.Host + "/" + o.Queue + "/" + o.TheirRoutes + "/" + o.StartedAt.String() + "/" + strconv.FormatBool(o.Expired)
	if key == w.waitingFor && time.Since(w.waitingLogged) < waitingLogEvery {
		return
	}
	w.waitingFor, w.waitingLogged = key, time.Now()
	msg := "waiting: a live worker works a queue of this worker with other routes; this worker works nothing " +
		"(not ready) and takes over once no worker with other routes works its queues"
	switch {
	case o.Expired:
		msg = "waiting: a newer worker with other routes worked a queue of this worker, and its record expired (it is out " +
			"of reach, or died without Stop): the queue's events wait for it, or for a worker started after it; this " +
			"worker works nothing (not ready): restart it to roll its routes out again"
	case o.State == recordWaiting:
		msg = "waiting: a newer worker with other routes waits for a queue of this worker; this worker works nothing (not ready)"
	}
	w.config.Logger.Warn(msg, o.fields()...)
}

// tryTakeOver claims the worker's queues, and starts working them when no
// worker with other routes works them any more.
func (w *Worker) tryTakeOver(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.State() != StateWaiting {
		return // Stop came first.
	}
	claimCtx, cancel := context.WithTimeout(ctx, max(w.registration.interval, time.Second))
	blocker, err := w.registration.claim(claimCtx)
	cancel()
	if err != nil {
		w.config.Logger.Warn("could not claim the worker's queues; retrying", zap.Error(err))
		return
	}
	if blocker != nil {
		w.waiting(blocker)
		return
	}
	w.setState(StateWorking)
	w.config.Logger.Info("taking over: no live worker with other routes works this worker's queues any more",
		zap.Strings("queues", w.registration.queues))
	if err := w.startWork(ctx); err != nil {
		// Its record says working: no other route set starts meanwhile.
		w.config.Logger.Warn("could not start working; retrying", zap.Error(err))
	}
}

// yieldToNewer starts a drain when a newer route set waits on one of the
// worker's queues, and returns the channel the drain reports on; nil when
// none waits. A worker that could not start working retries here.
func (w *Worker) yieldToNewer(ctx context.Context) <-chan bool {
	checkCtx, cancel := context.WithTimeout(ctx, max(w.registration.interval, time.Second))
	newer, err := w.registration.newerWaiting(checkCtx)
	cancel()
	if err != nil {
		w.config.Logger.Warn("could not look for a newer route set", zap.Error(err))
		return nil
	}
	// This loop renews the routes record too, so it never waits for the
	// lock: Start holds it while River's client starts, which may take
	// River's 10 s per queue and more on a slow database, and a record not
	// renewed meanwhile expires (three heartbeats), fences the worker and
	// lets a waiting route set take its queues (the soak's slow-start
	// scene found it so). The next poll tries again.
	if !w.mu.TryLock() {
		return nil
	}
	defer w.mu.Unlock()
	if newer == nil {
		if w.State() == StateWorking && !w.working {
			if err := w.startWork(ctx); err != nil {
				w.config.Logger.Warn("could not start working; retrying", zap.Error(err))
			}
		}
		return nil
	}
	if w.State() != StateWorking {
		return nil // Stop came first.
	}
	w.config.Logger.Info("a newer route set waits on a queue of this worker: finishing the jobs it holds, taking no new ones, then handing over",
		newer.fields()...)
	return w.drain(ctx)
}

// drain, called with w.mu held, stops the worker's work in the background:
// River's soft stop lets running jobs finish within SoftStopTimeout (then
// they are cancelled), and nothing new is fetched. The channel receives
// whether it completed.
func (w *Worker) drain(ctx context.Context) <-chan bool {
	w.setState(StateDraining)
	drained := make(chan bool, 1)
	go func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		stopCtx, cancel := context.WithTimeout(ctx, w.config.SoftStopTimeout+drainHardStop)
		defer cancel()
		err := w.stopWork(stopCtx)
		if err != nil {
			w.config.Logger.Error("could not finish the jobs this worker holds; its routes record is left to expire", zap.Error(err))
		}
		drained <- err == nil
	}()
	return drained
}

// retire ends a drain: it deletes the routes record when the drain
// completed, and leaves the worker idle until Stop.
func (w *Worker) retire(ctx context.Context, drained bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.State() != StateDraining {
		return // Stop came first, and deletes the record.
	}
	w.setState(StateRetired)
	if drained {
		if err := w.registration.delete(ctx, w.config.Logger); err != nil {
			w.config.Logger.Warn("could not delete the worker's routes record; it expires", zap.Error(err))
		}
	}
	w.config.Logger.Warn("idle: a newer route set took over this worker's queues; it works nothing (not ready) until it is stopped")
}

// logFence says, after each renewal, when the worker fenced itself (no
// claim or renewal extended its records for fenceAfter) and when a renewal
// unfenced it. A worker that found another route set working its queue
// never unfences again: it drains, with the jobs it fetched snoozed.
func (w *Worker) logFence() {
	fenced := w.registration.fenced()
	if fenced == w.fenceSeen {
		return
	}
	w.fenceSeen = fenced
	if fenced {
		w.config.Logger.Warn("fenced: this worker could not renew its routes record in time, and begins no event "+
			"until a renewal lands (its jobs are snoozed, uncounted)", zap.Duration("record_ttl", w.registration.ttl()))
		return
	}
	w.config.Logger.Info("unfenced: this worker's routes record was renewed; it begins events again")
}

// renew renews the routes record. A working worker whose record was gone,
// or says waiting, claims its queues again (registration.reclaim), and
// drains, returning the drain's channel, when a worker with other routes
// took them meanwhile.
func (w *Worker) renew(ctx context.Context) <-chan bool {
	renewCtx, cancel := context.WithTimeout(ctx, max(w.registration.interval, time.Second))
	defer cancel()
	live, working, err := w.registration.renew(renewCtx)
	switch {
	case err != nil:
		w.config.Logger.Warn("could not renew the worker's routes record", zap.Error(err))
		return nil
	case working, live && w.State() != StateWorking:
		return nil
	case w.State() != StateWorking:
		// A waiting worker's next claim records it again; one that
		// drains as its reclaim found another route set has none.
		if w.State() != StateWaiting && !w.queueLost {
			w.config.Logger.Error("the routes record of this worker expired (the database was out of reach)",
				zap.Stringer("state", w.State()))
		}
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.State() != StateWorking {
		return nil
	}
	blocker, err := w.registration.reclaim(renewCtx)
	if err != nil {
		w.config.Logger.Warn("could not renew the worker's routes record", zap.Error(err))
		return nil
	}
	if blocker == nil {
		return nil
	}
	// Its records are deleted: it stays fenced, and its renewals find
	// nothing until it retires.
	w.queueLost = true
	w.config.Logger.Error("this worker's routes record expired (the database was out of reach), and a worker with other "+
		"routes works its queue since: this worker stops working", blocker.fields()...)
	// Unlocked by the deferred call before the drain takes the lock.
	return w.drain(ctx)
}
