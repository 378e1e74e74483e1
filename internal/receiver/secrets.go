package receiver

import (
	"context"
	"crypto/sha256"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// SecretsPollInterval is how often WatchSecrets reads each secrets file.
// Reading a few bytes a second per source costs nothing, and unlike file
// events it sees Kubernetes' swap of a mounted Secret (a new directory
// behind the ..data symlink) like any other write.
const SecretsPollInterval = time.Second

// SecretsFile is a file a source's secrets come from, which WatchSecrets
// re-reads while the server runs, so that a secret rotates without a
// restart.
type SecretsFile struct {
	// Path names the file. It is read whole each time, following symlinks,
	// and compared by content (a SHA-256 kept in memory, never logged).
	Path string
	// Secrets is the number of secrets of the source's Verifier at start,
	// the count logged before the first change.
	Secrets int
	// Verifier builds the source's verifier from the file's content and
	// returns how many secrets it holds in all. An error keeps the current
	// verifier; its message is logged, so it must carry no secret.
	Verifier func(content []byte) (provider.Verifier, int, error)
}

// liveVerifier is a source's current verifier. A request loads it once and
// verifies (and acknowledges) with it, so a swap never changes the
// verifier of a request under way.
type liveVerifier struct{ provider.Verifier }

// verifier returns the current verifier of a configured source.
func (s *Server) verifier(source string) provider.Verifier {
	return s.verifiers[source].Load().Verifier
}

// WatchSecrets reads the SecretsFile of every source that has one each
// SecretsPollInterval until ctx is done, and swaps in the verifier built
// from a file whose content changed; requests being verified finish with the
// verifier they started with, and the next ones use the new one. The first
// read builds the verifier too, in case the file changed since the server's
// verifier was built. A file that cannot be read, or whose content Verifier
// refuses, keeps the current verifier; each change is logged with counts
// only (never a secret, nor a hash of one) and counted in m when it is not
// nil. It returns once ctx is done; call it once.
func (s *Server) WatchSecrets(ctx context.Context, m *metrics.Secrets) {
	var watches []*secretsWatch
	for _, src := range s.sources {
		if src.SecretsFile != nil {
			watches = append(watches, &secretsWatch{source: src.Name, file: src.SecretsFile, live: s.verifiers[src.Name],
				secrets: src.SecretsFile.Secrets})
		}
	}
	if len(watches) == 0 {
		return
	}
	logger := s.config.Logger.Named("secrets")
	ticker := time.NewTicker(SecretsPollInterval)
	defer ticker.Stop()
	for {
		for _, w := range watches {
			w.poll(logger, m)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// secretsWatch is what WatchSecrets knows of one source's file.
type secretsWatch struct {
	source string
	file   *SecretsFile
	live   *atomic.Pointer[liveVerifier]
	// sum is the content last built or refused; read says whether there
	// is one.
	sum  [sha256.Size]byte
	read bool
	// secrets is the number of secrets of the current verifier.
	secrets int
	// readErr is the last read error, so that a file that stays unreadable
	// is logged once.
	readErr string
}

// poll reads the file once and acts on a change.
func (w *secretsWatch) poll(logger *zap.Logger, m *metrics.Secrets) {
	log := logger.With(zap.String("source", w.source), zap.String("path", w.file.Path))
	content, err := os.ReadFile(w.file.Path)
	if err != nil {
		if err.Error() != w.readErr {
			w.readErr = err.Error()
			m.Reload(w.source, metrics.ReloadUnreadable)
			log.Warn("secrets file unreadable; keeping the current secrets", zap.Error(err)) // *fs.PathError: no content.
		}
		return
	}
	sum := sha256.Sum256(content)
	if w.readErr != "" {
		w.readErr = ""
		if w.read && sum == w.sum {
			log.Info("secrets file readable again, unchanged")
		}
	}
	if w.read && sum == w.sum {
		return
	}
	first := !w.read
	w.sum, w.read = sum, true
	v, n, err := w.file.Verifier(content)
	if err != nil {
		m.Reload(w.source, metrics.ReloadRefused)
		log.Warn("secrets file refused; keeping the current secrets", zap.Error(err))
		return
	}
	w.live.Store(&liveVerifier{v})
	before := w.secrets
	w.secrets = n
	if first {
		log.Info("watching secrets file", zap.Int("secrets", n))
		return
	}
	m.Reload(w.source, metrics.ReloadApplied)
	log.Info("secrets reloaded", zap.Int("secrets_before", before), zap.Int("secrets_after", n))
}
