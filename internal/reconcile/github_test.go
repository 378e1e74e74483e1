package reconcile_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/testkit/providerapi"
	"github.com/hookinbox/hookinbox/pkg/config"
)

const (
	githubToken  = "github_pat_test_reconcile"
	githubSecret = "github webhook secret"
	githubAppID  = "424242"
)

func setupGitHub(t *testing.T, hook string, auth func(r *http.Request) bool) (*inbox, *providerapi.GitHub, *httptest.Server) {
	t.Helper()
	in := setupInbox(t, config.SourceConfig{Name: "gh", Provider: "github", Secrets: []config.Secret{githubSecret}})
	fake := providerapi.NewGitHub(hook, in.url+"/webhooks/gh", githubSecret, auth)
	server := httptest.NewServer(fake)
	t.Cleanup(server.Close)
	return in, fake, server
}

func TestGitHubReconciliation(t *testing.T) {
	t.Parallel()

	t.Run("RedeliversExactlyTheMissingDeliveries", func(t *testing.T) {
		t.Parallel()
		in, fake, server := setupGitHub(t, "/repos/octo/hello/hooks/1", providerapi.Bearer(githubToken))
		now := time.Now()
		ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
		fake.Add("g6", now.Add(-96*time.Hour), false, http.StatusBadGateway) // beyond GitHub's 3 days
		fake.Add("g5", ago(90), false, http.StatusBadGateway)
		fake.Add("g1", ago(80), false, http.StatusOK)
		fake.Add("g2", ago(70), false, http.StatusBadGateway)
		fake.Add("g3", ago(60), false, http.StatusOK)        // answered 2xx, yet not in the inbox
		fake.Add("g4", ago(50), false, 0)                    // timed out at GitHub, yet stored
		fake.Add("g2", ago(40), true, http.StatusBadGateway) // a manual redelivery that failed too
		for _, m := range []int{30, 20, 10} {
			fake.Add("g5", ago(m), true, http.StatusBadGateway) // redelivered in vain, three times
		}
		for _, guid := range []string{"g1", "g4"} {
			in.post(t, "gh", fake.Headers(guid, fake.Payloads[guid]), fake.Payloads[guid])
		}
		fake.Fail = providerapi.Failures{2: http.StatusTooManyRequests}
		w := &waits{}
		g, err := reconcile.NewGitHub(&reconcile.GitHubConfig{
			Hook: "repos/octo/hello/hooks/1", Token: githubToken, BaseURL: server.URL, PageSize: 3,
			Retry: reconcile.RetryConfig{Sleep: w.sleep, HTTPClient: server.Client()},
		})
		require.NoError(t, err)

		res, err := g.Reconcile(context.Background(), reconcile.Window{Since: now.Add(-2 * time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 5, Duplicates: 2, Redelivered: 2, Abandoned: []string{"g5"}}, counts(res))
		require.Equal(t, []string{"g2", "g3"}, missingIDs(res))
		require.True(t, res.Missing[0].At.Equal(ago(70).UTC().Truncate(time.Second)), "a guid's time is its first delivery's")
		require.Equal(t, []int{http.StatusOK, http.StatusOK}, fake.Answers, "both redeliveries passed the receiver's verifier")
		require.Equal(t, []string{"g1", "g2", "g3", "g4"}, in.eventIDs(t, "gh"))
		require.Equal(t, 4, in.jobs(t))
		// Pages 10-8, 7-5 (after a 429 that named its wait), 4-2 and 1, the
		// first delivery before the window; then the newest delivery of
		// each missing guid was redelivered.
		require.Equal(t, []time.Duration{time.Second}, w.got)
		require.Equal(t, []string{
			"GET /repos/octo/hello/hooks/1/deliveries?per_page=3",
			"GET /repos/octo/hello/hooks/1/deliveries?cursor=v1_3&per_page=3",
			"GET /repos/octo/hello/hooks/1/deliveries?cursor=v1_3&per_page=3",
			"GET /repos/octo/hello/hooks/1/deliveries?cursor=v1_6&per_page=3",
			"GET /repos/octo/hello/hooks/1/deliveries?cursor=v1_9&per_page=3",
			"POST /repos/octo/hello/hooks/1/deliveries/7/attempts",
			"POST /repos/octo/hello/hooks/1/deliveries/5/attempts",
		}, fake.Requests)

		// A second run finds nothing missing (but g5, still left alone).
		res, err = g.Reconcile(context.Background(), reconcile.Window{Since: now.Add(-2 * time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 5, Duplicates: 4, Abandoned: []string{"g5"}}, counts(res))
		require.Len(t, fake.Answers, 2)
		require.Equal(t, 4, in.jobs(t))
	})

	t.Run("ARedeliveryMustPassTheVerifier", func(t *testing.T) {
		t.Parallel()
		in, fake, server := setupGitHub(t, "/orgs/octo/hooks/7", providerapi.Bearer(githubToken))
		fake.Secret = "not the source's secret"
		fake.Add("g1", time.Now().Add(-time.Minute), false, http.StatusBadGateway)
		g, err := reconcile.NewGitHub(&reconcile.GitHubConfig{Hook: "orgs/octo/hooks/7", Token: githubToken, BaseURL: server.URL})
		require.NoError(t, err)
		res, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 1, Redelivered: 1}, counts(res))
		require.Equal(t, []int{http.StatusUnauthorized}, fake.Answers)
		require.Empty(t, in.eventIDs(t, "gh"), "reconciliation stores nothing itself")
	})

	t.Run("AnAppAuthenticatesWithAJWT", func(t *testing.T) {
		t.Parallel()
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		in, fake, server := setupGitHub(t, "/app/hook", appJWT(t, &key.PublicKey))
		fake.Add("g1", time.Now().Add(-2*time.Minute), false, http.StatusOK)
		fake.Add("g2", time.Now().Add(-time.Minute), false, http.StatusInternalServerError)
		in.post(t, "gh", fake.Headers("g1", fake.Payloads["g1"]), fake.Payloads["g1"])
		pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		parsed, err := reconcile.ParseRSAPrivateKey(pemKey)
		require.NoError(t, err)
		g, err := reconcile.NewGitHub(&reconcile.GitHubConfig{Hook: "app", AppID: githubAppID, PrivateKey: parsed, BaseURL: server.URL})
		require.NoError(t, err)
		res, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 2, Duplicates: 1, Redelivered: 1}, counts(res))
		require.Equal(t, []string{"g1", "g2"}, in.eventIDs(t, "gh"))
		require.Equal(t, "POST /app/hook/deliveries/2/attempts", fake.Requests[len(fake.Requests)-1])

		// A token is not the App's JWT.
		g, err = reconcile.NewGitHub(&reconcile.GitHubConfig{Hook: "app", AppID: "1", PrivateKey: parsed, BaseURL: server.URL})
		require.NoError(t, err)
		_, err = g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.ErrorContains(t, err, "GET /app/hook/deliveries answered 401: Bad credentials")
	})
}

// appJWT checks an App JWT as GitHub does: RS256 under the App's public
// key, issued by the App, valid now, for at most 10 minutes.
func appJWT(t *testing.T, pub *rsa.PublicKey) func(r *http.Request) bool {
	t.Helper()
	return func(r *http.Request) bool {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		parts := strings.Split(token, ".")
		if !ok || len(parts) != 3 {
			return false
		}
		enc := base64.RawURLEncoding
		header, err1 := enc.DecodeString(parts[0])
		claims, err2 := enc.DecodeString(parts[1])
		sig, err3 := enc.DecodeString(parts[2])
		if err1 != nil || err2 != nil || err3 != nil || !bytes.Equal(header, []byte(`{"alg":"RS256","typ":"JWT"}`)) {
			return false
		}
		digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) != nil {
			return false
		}
		var c struct {
			Iat, Exp int64
			Iss      string
		}
		now := time.Now().Unix()
		return json.Unmarshal(claims, &c) == nil && c.Iss == githubAppID && c.Iat <= now && now < c.Exp && c.Exp-c.Iat <= 600
	}
}
