package daemon_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/rejection"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// TestRejectionSamples floods the receiver with refused deliveries that
// carry every configured secret in their headers, and checks that the
// samples are few, bounded, useful, and never hold a secret.
func TestRejectionSamples(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	const (
		whsec      = "whsec_cmVqZWN0aW9uLXNhbXBsZXMtc2VjcmV0"
		password   = "marqeta-basic-password-9f3"
		apiKey     = "partner-api-key-51c0d2"
		hmacSecret = "partner-hmac-secret-77ab"
		adminToken = "admin-token-0123456789abcdef"
		reconKey   = "rk_test_reconcile_0451"
	)
	cfg := &config.Config{
		Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
		Receiver: config.ReceiverConfig{Rejections: config.RejectionsConfig{RecorderConfig: rejection.RecorderConfig{Keep: 4, SampleBurst: 3, SampleEvery: time.Hour}}},
		Sources: []config.SourceConfig{
			{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{whsec}},
			{Name: "stripe", Provider: "stripe", Secrets: []config.Secret{"whsec_stripe_secret_for_test"},
				Reconcile: reconcile.Config{Enabled: true, APIKey: reconKey}},
			{Name: "marqeta", Provider: "marqeta", BasicAuth: []config.BasicAuthConfig{{Username: "hookinbox", Password: password}}},
			{Name: "partner", Provider: "hmac", Secrets: []config.Secret{hmacSecret},
				HMAC: config.HMACConfig{Header: "X-Signature", IDHeader: "X-Id", APIKeyHeader: "X-Partner-Key", APIKeys: []config.Secret{apiKey}}},
		},
		Worker: config.WorkerConfig{Listen: "127.0.0.1:0", Config: worker.Config{Routes: []worker.Route{{Source: "*", Handlers: []string{"noop"}}}},
			Admin: config.WorkerAdminConfig{Token: adminToken}},
	}
	cfg.ApplyDefaults()
	require.NoError(t, cfg.Validate())
	env := &daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool}
	srv, stop, err := daemon.NewReceiver(env)
	require.NoError(t, err)
	url := serveReceiver(t, srv)
	secrets := cfg.SecretValues()
	require.Len(t, secrets, 7)

	// Hostile or misconfigured senders put secrets everywhere: in
	// signature and auth headers, in made-up headers, base64-encoded.
	headers := func(source string) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("User-Agent", "flood/1.0")
		h.Set("Webhook-Id", "msg_1")
		h.Set("Webhook-Timestamp", "1700000000")
		h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString([]byte(whsec)))
		// A wrong user with the right password: refused, and still secret.
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("intruder:"+password)))
		h.Set("X-Partner-Key", apiKey)
		h.Set("X-Debug", "secrets were "+hmacSecret+", "+password+" and "+adminToken)
		h.Set("X-Echo", reconKey)
		h.Set("X-Echo-B64", base64.RawURLEncoding.EncodeToString([]byte(whsec)))
		return h
	}
	var wg sync.WaitGroup
	for i := range 200 {
		source := []string{"bank", "stripe", "marqeta", "partner", "made-up"}[i%5]
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/"+source, strings.NewReader(`{"unsigned":true}`))
			req.Header = headers(source)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("an unsigned delivery to %s was answered %d", source, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	stop() // The recorder writes what it queued, then stops.

	store := rejection.NewStore(db.Pool)
	n, err := store.Count(t.Context())
	require.NoError(t, err)
	// 160 refusals of configured sources: the burst of 3 each, no more
	// within the hour's rate; the made-up source is never recorded.
	require.EqualValues(t, 4*3, n)
	dump, err := store.Dump(t.Context())
	require.NoError(t, err)
	for _, s := range secrets {
		require.NotContains(t, dump, s, "a configured secret in the table")
		require.NotContains(t, dump, base64.StdEncoding.EncodeToString([]byte(s)))
	}
	require.NotContains(t, dump, "made-up")
	require.NotContains(t, dump, "unsigned", "no body is kept")

	samples, err := store.List(t.Context(), "bank", 0)
	require.NoError(t, err)
	require.Len(t, samples, 3)
	s := samples[0]
	require.Equal(t, "signature", s.Reason)
	require.Equal(t, http.StatusUnauthorized, s.Status)
	require.Equal(t, "127.0.0.1", s.RemoteAddr)
	require.NotEmpty(t, s.RequestID)
	require.Equal(t, "flood/1.0", s.Headers["User-Agent"], "harmless headers are kept for debugging")
	require.Equal(t, "msg_1", s.Headers["Webhook-Id"])
	for _, name := range []string{"Webhook-Signature", "Authorization", "X-Partner-Key", "X-Debug", "X-Echo", "X-Echo-B64"} {
		require.True(t, strings.HasPrefix(s.Headers[name], "[redacted, "), "%s: %q", name, s.Headers[name])
	}
}

// TestRejectionSamplesKeepTheLastN checks the table's bound: a source keeps
// its newest Keep samples.
func TestRejectionSamplesKeepTheLastN(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	store := rejection.NewStore(db.Pool)
	for i := range 10 {
		require.NoError(t, store.Insert(t.Context(), &rejection.Sample{Source: "bank", Reason: "signature", Status: 401,
			RequestID: string(rune('a' + i)), Headers: map[string]string{}}, 3))
		require.NoError(t, store.Insert(t.Context(), &rejection.Sample{Source: "other", Reason: "signature", Status: 401,
			Headers: map[string]string{}}, 3))
	}
	samples, err := store.List(t.Context(), "bank", 0)
	require.NoError(t, err)
	require.Len(t, samples, 3)
	require.Equal(t, []string{"j", "i", "h"}, []string{samples[0].RequestID, samples[1].RequestID, samples[2].RequestID})
	n, err := store.Count(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 6, n)
}
