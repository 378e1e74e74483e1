package daemon

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"riverqueue.com/riverui"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/logging"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// riverUIPrefix is where the worker serves River UI on worker.listen.
const riverUIPrefix = "/riverui"

// Metrics returns the registry that e's /metrics serves, made on first use
// with the Go and process collectors, the backlog collector (the inbox's
// pending and failed rows, River's queue depth) and the durability
// collector (what a 2xx survives). NewReceiver and newWorker
// register their metrics on it.
func (e *Env) Metrics() *prometheus.Registry {
	if e.metrics == nil {
		e.metrics = metrics.NewRegistry()
		sources := make([]string, len(e.Config.Sources))
		for i, s := range e.Config.Sources {
			sources[i] = s.Name
		}
		e.metrics.MustRegister(metrics.NewBacklog(inboxstore.New(e.Pool), &metrics.BacklogConfig{
			Cache: e.MetricsCache, Sources: sources, Logger: e.Logger.Named("metrics"),
		}))
		keep := e.Config.Database.Durability.KeepRemoteWrite
		e.metrics.MustRegister(metrics.NewDurability(&metrics.DurabilityConfig{
			Read: func(ctx context.Context) (*inboxstore.Durability, error) {
				return inboxstore.ReadDurability(ctx, e.Pool, keep)
			},
			Cache: e.MetricsCache, Logger: e.Logger.Named("metrics"),
		}))
	}
	return e.metrics
}

// outboxMetrics returns the relay's counter, registered on first use on
// Metrics with the collector of the outbox's backlog and disabled
// destinations: a worker that runs the relay exports them.
func (e *Env) outboxMetrics() *metrics.Outbox {
	if e.outbox == nil {
		reg := e.Metrics()
		e.outbox = metrics.NewOutbox(reg)
		reg.MustRegister(metrics.NewOutboxBacklog(relay.NewStore(e.Pool), &metrics.OutboxBacklogConfig{
			Cache: e.MetricsCache, Destinations: slices.Sorted(maps.Keys(e.Config.Worker.Destinations)), Logger: e.Logger.Named("metrics"),
		}))
	}
	return e.outbox
}

// receiverHandler is what the receiver serves on receiver.listen once the
// database is ready: srv's handler and, unless receiver.ops_listen is set
// (receiverOpsHandler serves it there), GET /metrics, unauthenticated.
func receiverHandler(env *Env, srv *receiver.Server) http.Handler {
	if env.Config.Receiver.OpsListen != "" {
		return srv.Handler()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(env.Metrics()))
	mux.Handle("/", srv.Handler())
	return mux
}

// receiverOpsHandler is what the receiver serves on receiver.ops_listen
// once the database is ready: GET /healthz, /readyz (srv's) and /metrics,
// unauthenticated, and 404 for anything else (no webhook).
func receiverOpsHandler(env *Env, srv *receiver.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(env.Metrics()))
	mux.Handle("GET /healthz", srv.Handler())
	mux.Handle("GET /readyz", srv.Handler())
	return mux
}

// workerHandler is what the worker serves on worker.listen once River has
// started: /healthz, /readyz and /metrics, unauthenticated, and, when
// worker.ui.enabled, River UI at /riverui/ behind Basic Auth. River UI's
// background services run until ctx is done.
func workerHandler(ctx context.Context, env *Env, w *worker.Worker) (http.Handler, error) {
	mux := healthMux(env, w)
	mux.Handle("GET /metrics", metrics.Handler(env.Metrics()))
	if err := mountAdmin(mux, env, w.Client()); err != nil {
		return nil, err
	}
	ui := env.Config.Worker.UI
	if !ui.Enabled {
		return mux, nil
	}
	if len(ui.BasicAuth) == 0 {
		// Validate refuses this config; never serve the UI open anyway.
		return nil, fmt.Errorf("worker.ui.basic_auth: required when worker.ui.enabled is true")
	}
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(w.Client(), nil),
		Logger:    logging.Slog(env.Logger.Named("riverui")),
		Prefix:    riverUIPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("river ui: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("river ui: %w", err)
	}
	guarded := guardUI(&ui, h)
	mux.Handle(riverUIPrefix, guarded)
	mux.Handle(riverUIPrefix+"/", guarded)
	env.Logger.Info("River UI enabled", zap.String("path", riverUIPrefix+"/"), zap.Bool("read_only", ui.ReadOnly))
	return mux, nil
}

// guardUI lets through only requests with one of ui's Basic Auth
// credentials (401 otherwise), and, when ui is read-only, only reads: River
// UI's mutating calls (retry, cancel, delete, pause, resume, update) are
// POST, PUT and PATCH, refused with 403. A mutating call another site's page
// makes the browser send (it would carry the cached credentials) is refused
// with 403 too (http.CrossOriginProtection: Sec-Fetch-Site, then Origin).
func guardUI(ui *config.WorkerUIConfig, next http.Handler) http.Handler {
	accepted := make([]provider.BasicAuth, len(ui.BasicAuth))
	for i, ba := range ui.BasicAuth {
		accepted[i] = provider.BasicAuth{Username: ba.Username, Password: ba.Password.Reveal()}
	}
	readOnly := ui.ReadOnly
	crossOrigin := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if err := provider.CheckBasicAuth(r.Header, accepted); err != nil {
			rw.Header().Set("WWW-Authenticate", `Basic realm="hookinbox River UI", charset="UTF-8"`)
			http.Error(rw, "unauthorized", http.StatusUnauthorized)
			return
		}
		if readOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(rw, "River UI is read-only here (worker.ui.read_only)", http.StatusForbidden)
			return
		}
		if err := crossOrigin.Check(r); err != nil {
			http.Error(rw, "cross-origin request refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(rw, r)
	})
}
