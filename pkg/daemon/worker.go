package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/metrics"
	"github.com/hookinbox/hookinbox/pkg/receiver"
	"github.com/hookinbox/hookinbox/pkg/reconcile"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// NewWorker builds a Worker from env's config, resolving route handler names
// against registry (nil for the built-ins only).
func NewWorker(env *Env, registry *worker.Registry) (*worker.Worker, error) {
	wc := env.Config.Worker
	queues := make(map[string]int, len(wc.Queues))
	for _, q := range wc.Queues {
		queues[q] = wc.Concurrency
	}
	routes := make([]worker.Route, len(wc.Routes))
	for i, r := range wc.Routes {
		routes[i] = worker.Route{Source: r.Source, Types: r.Types, Handlers: r.Handlers}
	}
	// Every source's queue, so that the worker can refuse routes that leave
	// a source on its queues without a route.
	queueFor := QueueFor(env.Config)
	sources := make(map[string]string, len(env.Config.Sources))
	for _, s := range env.Config.Sources {
		sources[s.Name] = queueFor(s.Name)
	}
	if registry == nil {
		registry = worker.NewRegistry(env.Logger)
	}
	reconciled, err := reconcileSources(env.Config)
	if err != nil {
		return nil, err
	}
	var addWorkers func(*river.Workers)
	if len(reconciled) > 0 {
		rw := reconcile.NewWorker(env.Pool, reconciled, queueFor, env.Logger.Named("reconcile"))
		addWorkers = func(ws *river.Workers) { river.AddWorker(ws, rw) }
	}
	return worker.New(env.Pool, &worker.Config{
		Queues:            queues,
		MaxAttempts:       wc.MaxAttempts,
		JobTimeout:        wc.JobTimeout,
		RescueAfter:       wc.RescueAfter,
		FetchCooldown:     wc.FetchCooldown,
		FetchPollInterval: wc.FetchPollInterval,
		ReaperInterval:    wc.ReaperInterval,
		OrphanAfter:       wc.OrphanAfter,
		UnroutedDone:      wc.Unrouted == config.UnroutedDone,
		SynchronousCommit: wc.SynchronousCommit,
		Routes:            routes,
		Sources:           sources,
		Registry:          registry,
		QueueFor:          queueFor,
		SoftStopTimeout:   wc.SoftStopTimeout,
		GroupMaxEvents:    wc.GroupMaxEvents,
		Logger:            env.Logger,
		Metrics:           metrics.NewWorker(env.Metrics()),
		PauseRefresh:      wc.PauseRefresh,
		AddWorkers:        addWorkers,
		// On the first worked queue, like the reaper.
		PeriodicJobs: reconcile.PeriodicJobs(reconciled, wc.Queues[0]),
	})
}

// RunWorker works jobs and serves /healthz, /readyz, /metrics and River UI
// (see WorkerHandler) until ctx is done,
// then stops softly, and hard after worker.hard_stop_timeout more. It
// listens at once, then waits for the database (AwaitSchema) before it
// starts River: meanwhile /healthz answers 200 and /readyz 503. When ctx
// ends during the wait, it returns nil.
func RunWorker(ctx context.Context, env *Env, registry *worker.Registry) error {
	wc := env.Config.Worker
	env.Logger.Info("starting", zap.Any("config", env.Config.Redacted()), zap.Int32("pool_max_conns", env.Pool.Config().MaxConns))
	w, err := NewWorker(env, registry)
	if err != nil {
		return err
	}
	door, err := openFrontDoor("worker", "worker.listen", wc.Listen, &receiver.HTTPConfig{Logger: env.Logger})
	if err != nil {
		return err
	}
	if err := env.AwaitSchema(ctx); err != nil {
		if errors.Is(err, ErrPoolTooLarge) {
			_ = door.shutdown(wc.HardStopTimeout)
			return err
		}
		env.Logger.Info("stopping before the database was ready")
		return door.shutdown(wc.HardStopTimeout)
	}
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		_ = door.shutdown(wc.HardStopTimeout)
		return fmt.Errorf("start worker: %w", err)
	}
	uiCtx, stopUI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopUI()
	handler, err := WorkerHandler(uiCtx, env, w)
	if err != nil {
		_ = w.Stop(context.WithoutCancel(ctx))
		_ = door.shutdown(wc.HardStopTimeout)
		return err
	}
	door.open(handler)
	env.Logger.Info("worker started")

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

// healthMux serves the worker's /healthz and /readyz (the database is
// reachable and its schema has env.Sets).
func healthMux(env *Env) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		checkCtx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := Ready(env, env.Sets...)(checkCtx); err != nil {
			env.Logger.Warn("not ready", zap.Error(err))
			http.Error(rw, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ready\n"))
	})
	return mux
}
