package receiver_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// rotateBundle is a receiver loaded by config.Load from a file whose svix
// source reads its secrets from secretsFile, serving real HTTP on
// loopback, on a database of the test's own.
type rotateBundle struct {
	*e2eBundle
	logs    *observer.ObservedLogs
	metrics *prometheus.Registry
	// ids numbers the deliveries, so that each one is new.
	ids atomic.Int64
}

// setupRotate writes a config naming secretsFile and starts a receiver
// from it, exactly as cmd/receiver does but for the listener.
func setupRotate(t *testing.T, secretsFile string) *rotateBundle {
	t.Helper()
	db := dbtest.New(t)
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `
database: {url: %q}
sources:
  - {name: svix, provider: svix, secrets_file: %q, ack_timeout: 1m}
worker:
  routes: [{source: svix, types: ["*"], handlers: [log]}]
`, db.URL, secretsFile), 0o600))
	cfg, err := config.Load(path, config.NeedDatabase|config.NeedReceiver)
	require.NoError(t, err)
	core, logs := observer.New(zapcore.InfoLevel)
	logger := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	env := &daemon.Env{Config: cfg, Logger: logger, Pool: db.Pool}
	srv, stop, err := daemon.NewReceiver(env)
	require.NoError(t, err)
	t.Cleanup(stop)
	return &rotateBundle{e2eBundle: &e2eBundle{db: db, url: serve(t, srv)}, logs: logs, metrics: env.Metrics()}
}

// newSvixSecret returns a fresh "whsec_<base64>" secret.
func newSvixSecret() string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte(rand.Text()))
}

// send posts a new delivery signed with secret and returns the status. It
// calls no require, so that any goroutine may use it.
func (b *rotateBundle) send(secret string) (int, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return 0, err
	}
	id := "msg_" + strconv.FormatInt(b.ids.Add(1), 10)
	body := []byte(`{"type":"invoice.paid","data":{"invoice_id":"` + id + `"}}`)
	now := time.Now()
	signature, err := wh.Sign(id, now, body)
	if err != nil {
		return 0, err
	}
	header := http.Header{"Content-Type": {"application/json"}, "Svix-Id": {id},
		"Svix-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Svix-Signature": {signature}}
	r, err := b.tryPost("svix", header, body)
	return r.Status, err
}

func (b *rotateBundle) requireStatus(t *testing.T, want int, secret string) {
	t.Helper()
	status, err := b.send(secret)
	require.NoError(t, err)
	require.Equal(t, want, status)
}

// awaitStatus sends deliveries signed with secret until one gets want, and
// returns how long that took; it fails the test after 15s.
func (b *rotateBundle) awaitStatus(t *testing.T, want int, secret string) time.Duration {
	t.Helper()
	start := time.Now()
	probe := time.NewTicker(20 * time.Millisecond)
	defer probe.Stop()
	for ; ; <-probe.C {
		status, err := b.send(secret)
		require.NoError(t, err)
		if status == want {
			return time.Since(start)
		}
		require.Less(t, time.Since(start), 15*time.Second, "still %d, not %d", status, want)
	}
}

// awaitLog waits until there are n log lines with msg.
func (b *rotateBundle) awaitLog(t *testing.T, msg string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return b.logs.FilterMessage(msg).Len() >= n }, 15*time.Second, 10*time.Millisecond,
		"no %q line", msg)
}

// reloads returns hookinbox_secrets_reload_total{source="svix",result}.
func (b *rotateBundle) reloads(t *testing.T, result string) float64 {
	t.Helper()
	families, err := b.metrics.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "hookinbox_secrets_reload_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == "svix" && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// requireNoSecretLogged checks that no log line carries a secret.
func (b *rotateBundle) requireNoSecretLogged(t *testing.T, secrets ...string) {
	t.Helper()
	for _, entry := range b.logs.AllUntimed() {
		line := fmt.Sprint(entry.Message, entry.ContextMap())
		for _, s := range secrets {
			require.NotContains(t, line, strings.TrimPrefix(s, "whsec_"))
		}
	}
}

// writeAtomically replaces name's content the way an operator should, and
// as a Secret volume does: a new file renamed over the old one.
func writeAtomically(t *testing.T, name string, lines ...string) {
	t.Helper()
	tmp := name + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	require.NoError(t, os.Rename(tmp, name))
}

// client sends deliveries signed with the secret that is current at each
// moment, until stopped, and counts the answers.
type client struct {
	current atomic.Pointer[string]
	stop    chan struct{}
	done    sync.WaitGroup
	sent    atomic.Int64
	mu      sync.Mutex
	failed  []string
}

func startClient(b *rotateBundle, secret string) *client {
	c := &client{stop: make(chan struct{})}
	c.current.Store(&secret)
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			status, err := b.send(*c.current.Load())
			c.sent.Add(1)
			if err != nil || status/100 != 2 {
				c.mu.Lock()
				c.failed = append(c.failed, fmt.Sprintf("status %d, error %v", status, err))
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// halt stops the client and returns the number sent and the failures.
func (c *client) halt() (int64, []string) {
	close(c.stop)
	c.done.Wait()
	return c.sent.Load(), c.failed
}

func TestSecretRotation(t *testing.T) {
	t.Parallel()

	t.Run("AddTheNewThenRemoveTheOldWithNoFailedDelivery", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "svix")
		oldSecret, newSecret := newSvixSecret(), newSvixSecret()
		writeAtomically(t, file, oldSecret)
		b := setupRotate(t, file)
		b.awaitLog(t, "watching secrets file", 1)
		b.requireStatus(t, http.StatusOK, oldSecret)
		b.requireStatus(t, http.StatusUnauthorized, newSecret)

		// A provider sends throughout with the secret valid at each moment.
		c := startClient(b, oldSecret)

		// (a) The new secret beside the old one: both verify.
		writeAtomically(t, file, "# rotated in test", oldSecret, newSecret)
		added := b.awaitStatus(t, http.StatusOK, newSecret)
		b.requireStatus(t, http.StatusOK, oldSecret)
		c.current.Store(&newSecret) // The provider switches to the new secret.

		// (b) The old one removed: it fails, the new one keeps working.
		writeAtomically(t, file, newSecret)
		removed := b.awaitStatus(t, http.StatusUnauthorized, oldSecret)
		b.requireStatus(t, http.StatusOK, newSecret)

		sent, failed := c.halt()
		t.Logf("timeline: t=0 file written with old+new; t=%s first 2xx with the new secret. "+
			"t=0 file written with the new only; t=%s first 401 with the old. "+
			"Continuous client: %d deliveries, %d not 2xx", added.Round(time.Millisecond), removed.Round(time.Millisecond), sent, len(failed))
		require.Empty(t, failed)
		require.Positive(t, sent)
		require.Less(t, added, 3*time.Second, "the poll is every second")

		b.awaitLog(t, "secrets reloaded", 2)
		lines := b.logs.FilterMessage("secrets reloaded").AllUntimed()
		require.Equal(t, map[string]any{"source": "svix", "path": file, "secrets_before": int64(1), "secrets_after": int64(2)}, lines[0].ContextMap())
		require.Equal(t, map[string]any{"source": "svix", "path": file, "secrets_before": int64(2), "secrets_after": int64(1)}, lines[1].ContextMap())
		require.Equal(t, 2.0, b.reloads(t, "applied"))
		b.requireNoSecretLogged(t, oldSecret, newSecret)
	})

	t.Run("ABadFileKeepsTheOldSecrets", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "svix")
		oldSecret, newSecret := newSvixSecret(), newSvixSecret()
		writeAtomically(t, file, oldSecret)
		b := setupRotate(t, file)
		b.awaitLog(t, "watching secrets file", 1)
		c := startClient(b, oldSecret)

		// Empty, as a file truncated before it is written is.
		require.NoError(t, os.WriteFile(file, nil, 0o600))
		b.awaitLog(t, "secrets file refused; keeping the current secrets", 1)
		b.requireStatus(t, http.StatusOK, oldSecret)

		// A secret svix refuses (not base64): the whole file is refused.
		writeAtomically(t, file, newSecret, "whsec_not*base64!")
		b.awaitLog(t, "secrets file refused; keeping the current secrets", 2)
		b.requireStatus(t, http.StatusOK, oldSecret)
		b.requireStatus(t, http.StatusUnauthorized, newSecret)

		// Gone (unreadable), then a directory in its place.
		require.NoError(t, os.Remove(file))
		b.awaitLog(t, "secrets file unreadable; keeping the current secrets", 1)
		require.NoError(t, os.Mkdir(file, 0o700))
		b.awaitLog(t, "secrets file unreadable; keeping the current secrets", 2)
		b.requireStatus(t, http.StatusOK, oldSecret)
		require.NoError(t, os.Remove(file))

		// A good file again is taken.
		writeAtomically(t, file, oldSecret, newSecret)
		b.awaitStatus(t, http.StatusOK, newSecret)
		b.requireStatus(t, http.StatusOK, oldSecret)

		sent, failed := c.halt()
		t.Logf("continuous client through the bad files: %d deliveries, %d not 2xx", sent, len(failed))
		require.Empty(t, failed)
		require.Equal(t, 2.0, b.reloads(t, "refused"))
		require.Equal(t, 2.0, b.reloads(t, "unreadable"))
		require.Equal(t, 1.0, b.reloads(t, "applied"))
		for _, entry := range b.logs.FilterMessage("secrets file refused; keeping the current secrets").AllUntimed() {
			require.NotEmpty(t, entry.ContextMap()["error"])
		}
		b.requireNoSecretLogged(t, oldSecret, newSecret)
	})

	t.Run("KubernetesSymlinkSwap", func(t *testing.T) {
		t.Parallel()
		// A Secret volume as the kubelet lays it out: each key a symlink
		// through ..data to a timestamped directory; an update writes a
		// new directory and renames a new ..data symlink over the old.
		dir := t.TempDir()
		oldSecret, newSecret := newSvixSecret(), newSvixSecret()
		version := func(name string, secrets ...string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
			writeAtomically(t, filepath.Join(dir, name, "SVIX_WEBHOOK_SECRET"), secrets...)
			require.NoError(t, os.Symlink(name, filepath.Join(dir, "..data_tmp")))
			require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		}
		version("..2026_12_03_12_00_00.1", oldSecret)
		require.NoError(t, os.Symlink("..data/SVIX_WEBHOOK_SECRET", filepath.Join(dir, "SVIX_WEBHOOK_SECRET")))
		b := setupRotate(t, filepath.Join(dir, "SVIX_WEBHOOK_SECRET"))
		b.awaitLog(t, "watching secrets file", 1)
		c := startClient(b, oldSecret)

		version("..2026_12_03_12_01_00.2", oldSecret, newSecret)
		added := b.awaitStatus(t, http.StatusOK, newSecret)
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_12_03_12_00_00.1")))
		c.current.Store(&newSecret)

		version("..2026_12_03_12_02_00.3", newSecret)
		removed := b.awaitStatus(t, http.StatusUnauthorized, oldSecret)
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_12_03_12_01_00.2")))

		sent, failed := c.halt()
		t.Logf("symlink swap timeline: t=0 ..data swapped to old+new; t=%s first 2xx with the new secret. "+
			"t=0 ..data swapped to the new only; t=%s first 401 with the old. Continuous client: %d deliveries, %d not 2xx",
			added.Round(time.Millisecond), removed.Round(time.Millisecond), sent, len(failed))
		require.Empty(t, failed)
		require.Equal(t, 2.0, b.reloads(t, "applied"))
	})

}
