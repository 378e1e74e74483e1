// Package operator builds, from a loaded configuration, the parts that both
// the worker daemon (pkg/daemon) and inboxctl drive: the admin actions,
// bulk replay, the retention policies, reconciliation and the reading of
// what a 2xx survives. They name internal types, so they live here rather
// than in pkg/daemon, whose signatures name only public ones (issue 41).
package operator

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/logging"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/replay"
	"github.com/hookinbox/hookinbox/internal/retention"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// CheckTimeout bounds one attempt at a start-up check of the database
// (pkg/daemon's CheckSchema and its kin, ReadDurability).
const CheckTimeout = 15 * time.Second

// QueueFor maps a source to its configured River queue, River's default
// queue when it names none.
func QueueFor(cfg *config.Config) func(string) string {
	queues := make(map[string]string, len(cfg.Sources))
	for _, s := range cfg.Sources {
		queues[s.Name] = s.Queue
	}
	return func(source string) string {
		if q := queues[source]; q != "" {
			return q
		}
		return river.QueueDefault
	}
}

// NewAdmin returns the operator actions on pool's database, inserting jobs
// with client (which may be insert-only).
func NewAdmin(pool *pgxpool.Pool, cfg *config.Config, client *river.Client[pgx.Tx]) (*admin.Admin, error) {
	sources := make([]admin.Source, len(cfg.Sources))
	for i, s := range cfg.Sources {
		sources[i] = admin.Source{Name: s.Name, Provider: s.Provider}
	}
	return admin.New(pool, &admin.Config{
		Sources: sources, Client: client, QueueFor: QueueFor(cfg), ProviderConfig: currentProviderConfig(cfg),
	})
}

// currentProviderConfig returns a source's verifier config with the secrets
// it lists now: a source with a secrets_file has it read again, as the
// receiver does while it runs, so that a worker started before a rotation
// verifies with the rotated secrets.
func currentProviderConfig(cfg *config.Config) func(source string) (*provider.Config, error) {
	return func(source string) (*provider.Config, error) {
		i := slices.IndexFunc(cfg.Sources, func(s config.SourceConfig) bool { return s.Name == source })
		if i < 0 {
			return nil, fmt.Errorf("no source %q", source)
		}
		sc := &cfg.Sources[i]
		if sc.SecretsFile != "" {
			content, err := os.ReadFile(sc.SecretsFile)
			if err != nil {
				return nil, err // *fs.PathError names the file, never its content.
			}
			if sc, err = cfg.SourceWithSecretsFile(i, content); err != nil {
				return nil, err
			}
		}
		return sc.ProviderConfig(), nil
	}
}

// reconcileSources builds a reconciliation per source that enables one.
func reconcileSources(cfg *config.Config) ([]*reconcile.Source, error) {
	var out []*reconcile.Source
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		if !s.Reconcile.Enabled {
			continue
		}
		// Validate allows reconciliation for reconcile.Providers only.
		source, err := reconcile.NewSource(&s.Reconcile, s.Name, s.Provider, s.ProviderConfig())
		if err != nil {
			return nil, fmt.Errorf("sources[%s].reconcile: %w", s.Name, err)
		}
		out = append(out, source)
	}
	return out, nil
}

// NewReconcileWorker returns the reconciliation of cfg's sources that
// enable one, as the worker daemon runs it (its jobs' worker), claiming with
// client when set (inboxctl reconcile passes an insert-only one; nil: the
// client that works the job) and counting its runs in m (nil counts
// nothing). It is nil, with no error, when no source enables one.
func NewReconcileWorker(pool *pgxpool.Pool, cfg *config.Config, logger *zap.Logger, client *river.Client[pgx.Tx], m *metrics.Reconcile) (*reconcile.Worker, []*reconcile.Source, error) {
	sources, err := reconcileSources(cfg)
	if err != nil || len(sources) == 0 {
		return nil, nil, err
	}
	return reconcile.NewWorker(pool, &reconcile.WorkerConfig{
		Sources: sources, QueueFor: QueueFor(cfg), Client: client, Logger: logger.Named("reconcile"), Metrics: m,
	}), sources, nil
}

// RetentionPolicies returns every source's retention policy.
func RetentionPolicies(cfg *config.Config) []retention.Policy {
	policies := make([]retention.Policy, len(cfg.Sources))
	for i := range cfg.Sources {
		policies[i] = retention.Policy(*cfg.Sources[i].RetentionPolicy())
	}
	return policies
}

// NewReplayManager returns the bulk replay Manager of cfg, on an
// insert-only River client that stamps worker.max_attempts on the event jobs
// it enqueues, as the receiver's does (the worker aligns a job with its own
// value before running it). Replay jobs go to the worker's first
// queue ("default" when it works it).
func NewReplayManager(pool *pgxpool.Pool, cfg *config.Config, logger *zap.Logger) (*replay.Manager, error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:      logging.Slog(logger.Named("river")),
		MaxAttempts: cfg.Worker.MaxAttempts,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	queue := cfg.Worker.Queues[0]
	if slices.Contains(cfg.Worker.Queues, river.QueueDefault) {
		queue = river.QueueDefault
	}
	return replay.NewManager(pool, client, &replay.Config{
		Pace: cfg.Worker.Pace, Queue: queue, QueueFor: QueueFor(cfg),
	})
}

// ReadDurability reads what a 2xx survives on the server pool reaches
// (inboxstore.ReadDurability, with cfg's database.durability settings) in
// one attempt of at most CheckTimeout; when PostgreSQL cannot be reached,
// the error says so (Unreachable).
func ReadDurability(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config) (*inboxstore.Durability, error) {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	d, err := inboxstore.ReadDurability(ctx, pool, cfg.Database.Durability.KeepRemoteWrite)
	return d, Unreachable(err)
}

// Unreachable says "cannot reach PostgreSQL" in front of an error that
// inboxstore.Unavailable counts as the database's absence (the one
// classification: a connection not made, lost or closed); it returns any
// other error, or nil, as it is.
func Unreachable(err error) error {
	if inboxstore.Unavailable(err) {
		return fmt.Errorf("cannot reach PostgreSQL: %w", err)
	}
	return err
}
