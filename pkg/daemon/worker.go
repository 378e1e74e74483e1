package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/schema"
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
	return worker.New(env.Pool, &worker.Config{
		Queues:            queues,
		MaxAttempts:       wc.MaxAttempts,
		JobTimeout:        wc.JobTimeout,
		RescueAfter:       wc.RescueAfter,
		FetchCooldown:     wc.FetchCooldown,
		FetchPollInterval: wc.FetchPollInterval,
		ReaperInterval:    wc.ReaperInterval,
		OrphanAfter:       wc.OrphanAfter,
		FailUnrouted:      wc.Unrouted == "failed",
		SynchronousCommit: wc.SynchronousCommit,
		Routes:            routes,
		Sources:           sources,
		Registry:          registry,
		QueueFor:          queueFor,
		SoftStopTimeout:   wc.SoftStopTimeout,
		Logger:            env.Logger,
	})
}

// WorkerPoolConns is the pool size a worker needs: a connection per
// concurrent job, plus a few for River's producers and maintenance.
func WorkerPoolConns(cfg *config.Config) int32 {
	return int32(len(cfg.Worker.Queues)*cfg.Worker.Concurrency + 4)
}

// RunWorker works jobs and serves /healthz and /readyz until ctx is done,
// then stops softly, and hard after worker.hard_stop_timeout more.
func RunWorker(ctx context.Context, env *Env, registry *worker.Registry, sets ...*schema.Set) error {
	w, err := NewWorker(env, registry)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", env.Config.Worker.Listen)
	if err != nil {
		return fmt.Errorf("worker.listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		checkCtx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := Ready(env, sets...)(checkCtx); err != nil {
			env.Logger.Warn("not ready", zap.Error(err))
			http.Error(rw, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ready\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			env.Logger.Error("health server stopped", zap.Error(err))
		}
	}()
	env.Logger.Info("worker listening", zap.String("addr", ln.Addr().String()))

	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		_ = srv.Close()
		return fmt.Errorf("start worker: %w", err)
	}
	<-ctx.Done()
	env.Logger.Info("stopping: finishing running jobs", zap.Duration("soft_stop_timeout", env.Config.Worker.SoftStopTimeout))
	stopCtx, cancel := context.WithTimeout(context.Background(),
		env.Config.Worker.SoftStopTimeout+env.Config.Worker.HardStopTimeout)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		return err
	}
	_ = srv.Shutdown(stopCtx)
	env.Logger.Info("worker stopped")
	return nil
}
