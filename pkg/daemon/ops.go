package daemon

import (
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/internal/rejection"
)

// This file wires issue 14's operations features: rejection samples in
// the receiver, reconciliation jobs and the admin API in the worker (their
// parts that inboxctl drives too are built in internal/operator).

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

// mountAdmin serves the admin API on mux when worker.admin.token is set.
func mountAdmin(mux *http.ServeMux, env *Env, client *river.Client[pgx.Tx]) error {
	token := env.Config.Worker.Admin.Token
	if token == "" {
		return nil
	}
	a, err := operator.NewAdmin(env.Pool, env.Config, client)
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
