package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/buildinfo"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/logging"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// Receiver is the receiver's server as NewReceiver builds it, for a test or
// an embedder that serves it on a listener of its own (RunReceiver serves
// it behind the front door's connection limits).
type Receiver struct {
	srv *receiver.Server
}

// Handler returns the receiver's webhook routes (POST
// /webhooks/{source}), without the front door's probes and metrics.
func (r *Receiver) Handler() http.Handler { return r.srv.Handler() }

// NewReceiver builds the receiver's server from env: a verifier per source,
// an insert-only River client, which stamps worker.max_attempts on the jobs
// it enqueues (the worker aligns a job with its own value before running
// it), and the group-commit batcher. It re-reads the sources' secrets
// files (receiver.Server.WatchSecrets) until stop. Call stop after the
// server has shut down.
func NewReceiver(env *Env) (r *Receiver, stop func(), err error) {
	srv, stop, err := newReceiver(env)
	if err != nil {
		return nil, nil, err
	}
	return &Receiver{srv: srv}, stop, nil
}

// newReceiver is NewReceiver with the receiver's own server, which
// RunReceiver serves.
func newReceiver(env *Env) (srv *receiver.Server, stop func(), err error) {
	cfg := env.Config
	rc := &river.Config{
		Logger:      logging.Slog(env.Logger.Named("river")),
		MaxAttempts: cfg.Worker.MaxAttempts,
	}
	if env.TracerProvider != nil {
		rc.Plugins = []rivertype.Plugin{insertTracing(env.TracerProvider)}
	}
	riverClient, err := river.NewClient(riverpgxv5.New(env.Pool), rc)
	if err != nil {
		return nil, nil, fmt.Errorf("river client: %w", err)
	}
	ingester := inboxstore.NewIngester(env.Pool, riverClient, &inboxstore.IngesterConfig{
		QueueFor: queueFor(cfg), KeepRemoteWrite: cfg.Database.Durability.KeepRemoteWrite,
	})

	sources := make([]receiver.Source, 0, len(cfg.Sources))
	for i := range cfg.Sources {
		src, err := newSource(&cfg.Sources[i])
		if err != nil {
			return nil, nil, fmt.Errorf("sources[%d]: %w", i, err)
		}
		if cfg.Sources[i].SecretsFile != "" {
			src.SecretsFile = secretsFile(cfg, i)
		}
		sources = append(sources, *src)
	}
	var batcher *inboxstore.Batcher
	m := metrics.NewReceiver(env.Metrics(), &metrics.ReceiverConfig{
		InFlight: func() int { return srv.InFlight() },
		Queued:   func() int { return batcher.Queued() },
	})
	// The group commit's settings come defaulted and validated from the
	// receiver: section; the rest is set here.
	bc := cfg.Receiver.BatcherConfig
	bc.SourceShare = cfg.Receiver.ServerConfig.SourceShare // one setting for both budgets
	bc.Logger = env.Logger.Named("batcher")
	bc.ObserveGroup = m.Batch
	bc.TracerProvider = env.TracerProvider
	batcher = inboxstore.NewBatcher(ingester, &bc)
	rejections := newRejectionRecorder(env)
	stopAll := func() {
		batcher.Stop()
		if rejections != nil {
			rejections.Stop()
		}
	}
	// The receiver's own settings come defaulted and validated from the
	// receiver: section; the rest is set here.
	srv, err = receiver.New(batcher, &receiver.Config{
		ServerConfig:   cfg.Receiver.ServerConfig,
		Sources:        sources,
		Logger:         env.Logger,
		Metrics:        m,
		Rejections:     rejections,
		TracerProvider: env.TracerProvider,
	})
	if err != nil {
		stopAll()
		return nil, nil, err
	}
	stopWatching := watchSecrets(env, srv)
	return srv, func() {
		stopWatching()
		stopAll()
	}, nil
}

// RunReceiver serves the receiver until ctx is done. It listens at once,
// then waits for the database (AwaitSchema): meanwhile /healthz answers 200,
// and /readyz and webhooks 503 with Retry-After. Once the schema checks out
// it accepts webhooks, and /readyz answers 200 until ctx is done, whether
// the database answers or not (webhooks get 503 with Retry-After while it
// does not). When ctx ends during the wait, it returns nil.
func RunReceiver(ctx context.Context, env *Env) error {
	cfg := env.Config
	env.Logger.Info("starting", zap.String("version", buildinfo.Version()), zap.Any("config", cfg.Redacted()), zap.Int32("pool_max_conns", env.Pool.Config().MaxConns))
	stopTracing, err := startTracing(ctx, env)
	if err != nil {
		return err
	}
	defer stopTracing()
	srv, stop, err := newReceiver(env)
	if err != nil {
		return err
	}
	defer stop()
	door, err := openFrontDoor("receiver", "receiver.listen", cfg.Receiver.Listen, srv.HTTPConfig())
	if err != nil {
		return err
	}
	var ops *frontDoor // nil: everything on the webhook port
	if cfg.Receiver.OpsListen != "" {
		if ops, err = openOpsDoor(cfg, env.Logger); err != nil {
			_ = door.shutdown(cfg.Receiver.ShutdownTimeout)
			return err
		}
	}
	// The ops door closes last, so that the drain can still be scraped.
	shutdown := func() error {
		err := door.shutdown(cfg.Receiver.ShutdownTimeout)
		if ops != nil {
			err = errors.Join(err, ops.shutdown(cfg.Receiver.ShutdownTimeout))
		}
		return err
	}
	if err := env.AwaitSchema(ctx); err != nil {
		if errors.Is(err, errPoolTooLarge) {
			_ = shutdown()
			return err
		}
		env.Logger.Info("stopping before the database was ready")
		return shutdown()
	}
	door.open(receiverHandler(env, srv))
	if ops != nil {
		ops.open(receiverOpsHandler(env, srv))
	}
	env.Logger.Info("receiver accepting webhooks")
	select {
	case <-ctx.Done():
	case err := <-door.failed():
		return err
	case err := <-ops.failedOrNever():
		return err
	}
	if err := unreadyFor(door, ops, shutdownDelay(cfg), env.Logger); err != nil {
		return err
	}
	env.Logger.Info("receiver draining", zap.Duration("shutdown_timeout", cfg.Receiver.ShutdownTimeout))
	if err := shutdown(); err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	env.Logger.Info("receiver stopped")
	return nil
}

// openOpsDoor listens on receiver.ops_listen with the default connection
// limits: it serves probes and scrapes, not providers.
func openOpsDoor(cfg *config.Config, logger *zap.Logger) (*frontDoor, error) {
	return openFrontDoor("receiver ops", "receiver.ops_listen", cfg.Receiver.OpsListen, &receiver.HTTPConfig{
		RetryAfter: cfg.Receiver.RetryAfter,
		Logger:     logger,
	})
}

// shutdownDelay is receiver.shutdown_delay. Load defaults it; nil, in a
// Config built by hand without ApplyDefaults, means none.
func shutdownDelay(cfg *config.Config) time.Duration {
	if d := cfg.Receiver.ShutdownDelay; d != nil {
		return *d
	}
	return 0
}

// unreadyFor turns door and ops (which may be nil) unready (/readyz 503,
// connections closed after each answer) and keeps serving for delay, so
// that endpoints and load balancers stop sending traffic before the
// listener closes. It returns early, with the error, if a server stops on
// its own.
func unreadyFor(door, ops *frontDoor, delay time.Duration, logger *zap.Logger) error {
	door.unready()
	if ops != nil {
		ops.unready()
	}
	if delay <= 0 {
		return nil
	}
	logger.Info("receiver unready: serving until the shutdown delay ends", zap.Duration("shutdown_delay", delay))
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case err := <-door.failed():
		return err
	case err := <-ops.failedOrNever():
		return err
	}
}

// queueFor maps a source to its configured River queue
// (operator.QueueFor).
func queueFor(cfg *config.Config) func(string) string { return operator.QueueFor(cfg) }
