package daemon

import (
	"context"

	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// secretsFile lets the receiver re-read cfg.Sources[i]'s secrets_file: a
// new content is validated as Load validates the source
// (config.SourceWithSecretsFile), and the verifier rebuilt from it.
func secretsFile(cfg *config.Config, i int) *receiver.SecretsFile {
	return &receiver.SecretsFile{
		Path:    cfg.Sources[i].SecretsFile,
		Secrets: len(cfg.Sources[i].Secrets),
		Verifier: func(content []byte) (provider.Verifier, int, error) {
			sc, err := cfg.SourceWithSecretsFile(i, content)
			if err != nil {
				return nil, 0, err
			}
			src, err := newSource(sc)
			if err != nil {
				return nil, 0, err
			}
			return src.Verifier, len(sc.Secrets), nil
		},
	}
}

// watchSecrets runs srv.WatchSecrets until the returned stop is called,
// which waits for it to return.
func watchSecrets(env *Env, srv *receiver.Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m := metrics.NewSecrets(env.Metrics())
	go func() {
		defer close(done)
		srv.WatchSecrets(ctx, m)
	}()
	return func() {
		cancel()
		<-done
	}
}
