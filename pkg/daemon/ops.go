package daemon

import (
	"fmt"
	"net/http"
	"os"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/rejection"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// This file wires issue 14's operations features: rejection samples in
// the receiver, reconciliation jobs and the admin API in the worker.

// newRejectionRecorder returns the receiver's rejection sampler, or nil
// when receiver.rejections.disabled is set. Stop it after the server.
func newRejectionRecorder(env *Env) *rejection.Recorder {
	rc := env.Config.Receiver.Rejections
	if rc.Disabled {
		return nil
	}
	names := make([]string, len(env.Config.Sources))
	for i, s := range env.Config.Sources {
		names[i] = s.Name
	}
	config := rc.RecorderConfig // the settings decoded from receiver.rejections
	config.Sources, config.Secrets, config.Logger = names, env.Config.SecretValues(), env.Logger.Named("rejections")
	return rejection.NewRecorder(rejection.NewStore(env.Pool), &config)
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
		source, err := s.Reconcile.Source(s.Name, s.Provider, s.ProviderConfig())
		if err != nil {
			return nil, fmt.Errorf("sources[%s].reconcile: %w", s.Name, err)
		}
		out = append(out, source)
	}
	return out, nil
}

// NewReconcileWorker returns the reconciliation of env's sources that
// enable one, as the worker daemon runs it (its jobs' worker), claiming with
// client when set (inboxctl reconcile passes an insert-only one; nil: the
// client that works the job) and counting its runs in m (nil counts
// nothing). It is nil, with no error, when no source enables one.
func NewReconcileWorker(env *Env, client *river.Client[pgx.Tx], m *metrics.Reconcile) (*reconcile.Worker, []*reconcile.Source, error) {
	sources, err := reconcileSources(env.Config)
	if err != nil || len(sources) == 0 {
		return nil, nil, err
	}
	return reconcile.NewWorker(env.Pool, &reconcile.WorkerConfig{
		Sources: sources, QueueFor: queueFor(env.Config), Client: client, Logger: env.Logger.Named("reconcile"), Metrics: m,
	}), sources, nil
}

// NewAdmin returns the operator actions on env's database, inserting jobs
// with client (which may be insert-only).
func NewAdmin(env *Env, client *river.Client[pgx.Tx]) (*admin.Admin, error) {
	sources := make([]admin.Source, len(env.Config.Sources))
	for i, s := range env.Config.Sources {
		sources[i] = admin.Source{Name: s.Name, Provider: s.Provider}
	}
	return admin.New(env.Pool, &admin.Config{
		Sources: sources, Client: client, QueueFor: queueFor(env.Config), ProviderConfig: currentProviderConfig(env.Config),
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

// mountAdmin serves the admin API on mux when worker.admin.token is set.
func mountAdmin(mux *http.ServeMux, env *Env, client *river.Client[pgx.Tx]) error {
	token := env.Config.Worker.Admin.Token
	if token == "" {
		return nil
	}
	a, err := NewAdmin(env, client)
	if err != nil {
		return err
	}
	h, err := a.Handler(token, env.Logger.Named("admin"))
	if err != nil {
		return err
	}
	mux.Handle(admin.Prefix, h)
	env.Logger.Info("admin API enabled", zap.String("path", admin.Prefix))
	return nil
}
