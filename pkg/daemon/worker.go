package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/buildinfo"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/schema"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// newWorker builds a Worker from env's config, resolving route handler names
// against registry (nil for the built-ins only).
func newWorker(env *Env, registry *worker.Registry) (*worker.Worker, error) {
	wc := env.Config.Worker
	queues := make(map[string]int, len(wc.Queues))
	for _, q := range wc.Queues {
		queues[q] = wc.Concurrency
	}
	// Every source's queue, so that the worker can refuse routes that leave
	// a source on its queues without a route.
	queueOf := queueFor(env.Config)
	sources := make(map[string]string, len(env.Config.Sources))
	for _, s := range env.Config.Sources {
		sources[s.Name] = queueOf(s.Name)
	}
	if registry == nil {
		registry = worker.NewRegistry(env.Logger)
	}
	policies := make([]worker.RetentionPolicy, len(env.Config.Sources))
	for i := range env.Config.Sources {
		policies[i] = *env.Config.Sources[i].RetentionPolicy()
	}
	rw, reconciled, err := operator.NewReconcileWorker(env.Pool, env.Config, env.Logger, nil, metrics.NewReconcile(env.Metrics()))
	if err != nil {
		return nil, err
	}
	var relay *relay.Config // nil: this worker runs no relay
	if rc, ok, err := outboxRelay(env); err != nil {
		return nil, err
	} else if ok {
		relay = rc
	}
	var addWorkers func(*river.Workers)
	if rw != nil {
		addWorkers = func(ws *river.Workers) { river.AddWorker(ws, rw) }
	}
	// The worker's own settings come defaulted and validated from the
	// worker: section; the rest is set here.
	c := wc.Config
	c.Queues = queues
	c.UnroutedDone = wc.Unrouted == config.UnroutedDone
	c.PollOnly = env.Config.Database.TransactionPooled()
	c.Sources = sources
	c.Registry = registry
	c.QueueFor = queueOf
	c.Retention = policies
	c.Logger = env.Logger
	c.Metrics = env.Metrics()
	c.AddWorkers = addWorkers
	c.TracerProvider = env.TracerProvider
	c.Outbox = relay
	// On the first worked queue, like the reaper.
	c.PeriodicJobs = reconcile.PeriodicJobs(reconciled, wc.Queues[0])
	return worker.New(env.Pool, &c)
}

// startWorker starts w. When the database cannot be reached meanwhile, or
// drops the connection under a statement (it answered AwaitSchema a moment
// before, but every connection may be taken, it may be restarting, or the
// backend may be terminated: inboxstore.Unavailable), or is too slow to
// answer a statement within River's own bound on it (10 s for a queue's
// settings: a server recovering from a restart on a busy machine, a row
// locked), it starts w again on the start-up schedule (Env.Retry), logging
// each attempt, instead of exiting: a worker degrades, it does not crash.
// Any other error is returned, w stopped. It returns false when ctx ends
// first, w stopped.
func startWorker(ctx context.Context, env *Env, w *worker.Worker) (bool, error) {
	delay := cmp.Or(env.Retry.Initial, retryInitialDefault)
	maxDelay := cmp.Or(env.Retry.Max, retryMaxDefault)
	for attempt := 1; ; attempt++ {
		err := w.Start(context.WithoutCancel(ctx))
		if err == nil {
			return true, nil
		}
		// w.Start runs under no deadline of ours: one that ran out is a
		// bound of River's (the 30-minute soak, seed 101: a worker started
		// as PostgreSQL came back exited on "producer.StartWorkContext
		// timed out after 10s").
		timedOut := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		if !inboxstore.Unavailable(err) && !timedOut {
			_ = w.Stop(context.WithoutCancel(ctx))
			return false, err
		}
		env.Logger.Warn("could not start the worker; retrying", zap.Int("attempt", attempt), zap.Duration("retry_in", delay), zap.Error(err))
		select {
		case <-ctx.Done():
			_ = w.Stop(context.WithoutCancel(ctx))
			return false, nil
		case <-time.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}

// RunWorker works jobs and serves /healthz, /readyz, /metrics and River UI
// (see workerHandler) until ctx is done (a worker that finds other routes
// on its queues waits, unready, until their workers hand over: see
// worker.Worker.Start),
// then stops softly, and hard after worker.hard_stop_timeout more. It
// listens at once, then waits for the database (AwaitSchema) before it
// starts River: meanwhile /healthz answers 200 and /readyz 503. When ctx
// ends during the wait, it returns nil.
func RunWorker(ctx context.Context, env *Env, registry *worker.Registry) error {
	wc := env.Config.Worker
	env.Logger.Info("starting", zap.String("version", buildinfo.Version()), zap.Any("config", env.Config.Redacted()), zap.Int32("pool_max_conns", env.Pool.Config().MaxConns))
	stopTracing, err := startTracing(ctx, env)
	if err != nil {
		return err
	}
	// Deferred first, so run last: after the worker stopped.
	defer stopTracing()
	w, err := newWorker(env, registry)
	if err != nil {
		return err
	}
	door, err := openFrontDoor("worker", "worker.listen", wc.Listen, &receiver.HTTPConfig{Logger: env.Logger})
	if err != nil {
		return err
	}
	if err := env.AwaitSchema(ctx); err != nil {
		if errors.Is(err, errPoolTooLarge) {
			_ = door.shutdown(wc.HardStopTimeout)
			return err
		}
		env.Logger.Info("stopping before the database was ready")
		return door.shutdown(wc.HardStopTimeout)
	}
	started, err := startWorker(ctx, env, w)
	if err != nil || !started {
		_ = door.shutdown(wc.HardStopTimeout)
		if err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		env.Logger.Info("stopping before the worker started")
		return nil
	}
	uiCtx, stopUI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopUI()
	handler, err := workerHandler(uiCtx, env, w)
	if err != nil {
		_ = w.Stop(context.WithoutCancel(ctx))
		_ = door.shutdown(wc.HardStopTimeout)
		return err
	}
	door.open(handler)
	env.Logger.Info("worker started", zap.Stringer("state", w.State()))

	var served error
	select {
	case <-ctx.Done():
	case served = <-door.failed():
		env.Logger.Error("health server stopped", zap.Error(served))
	}
	env.Logger.Info("stopping: finishing running jobs", zap.Duration("soft_stop_timeout", wc.SoftStopTimeout))
	stopCtx, cancel := context.WithTimeout(context.Background(), wc.SoftStopTimeout+wc.HardStopTimeout)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		return err
	}
	if served != nil {
		return served
	}
	if err := door.shutdown(wc.HardStopTimeout); err != nil {
		return err
	}
	env.Logger.Info("worker stopped")
	return nil
}

// healthMux serves the worker's /healthz and /readyz: ready while w works
// its queues (not while it waits for workers with other routes to hand
// over, nor once it handed over to newer ones: see worker.Worker.Start; it
// logs why itself), the database is reachable and its schema has env.Sets.
func healthMux(env *Env, w *worker.Worker) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		if state := w.State(); state != worker.StateWorking {
			http.Error(rw, "not ready: "+stateReason(state), http.StatusServiceUnavailable)
			return
		}
		checkCtx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := readyCheck(env, env.Sets...)(checkCtx); err != nil {
			env.Logger.Warn("not ready", zap.Error(err))
			http.Error(rw, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ready\n"))
	})
	return mux
}

// stateReason says why a worker in state is not ready.
func stateReason(state worker.State) string {
	switch state {
	case worker.StateWaiting:
		return "waiting for the workers with other routes on its queues to hand over"
	case worker.StateDraining:
		return "a newer route set waits: finishing the jobs it holds"
	case worker.StateRetired:
		return "a newer route set took over its queues"
	}
	return state.String()
}

// readyCheck reports whether the database is reachable and its schema new enough.
func readyCheck(env *Env, sets ...*schema.Set) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := env.Pool.Ping(ctx); err != nil {
			return err
		}
		return schema.Check(ctx, env.Pool, sets...)
	}
}
