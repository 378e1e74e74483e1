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
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/config"
)

const (
	githubToken  = "github_pat_test_reconcile"
	githubSecret = "github webhook secret"
	githubAppID  = "424242"
)

// ghDelivery is an element of GitHub's list of a hook's deliveries.
type ghDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Duration    float64   `json:"duration"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      string    `json:"action"`
}

// fakeGitHub speaks GitHub's webhook deliveries API for one hook: GET
// <hook>/deliveries (per_page, cursor, a Link header naming the next page,
// newest first) and POST <hook>/deliveries/{id}/attempts, which, like
// GitHub, sends the delivery's payload again to the receiver, signed with
// the hook's secret (X-Hub-Signature-256) and under the same
// X-GitHub-Delivery, and lists the attempt as a redelivery.
type fakeGitHub struct {
	hook     string                     // "/repos/octo/hello/hooks/1"
	auth     func(r *http.Request) bool // checks the credentials
	receiver string                     // where deliveries go
	secret   string                     // what they are signed with
	fail     failures

	mu         sync.Mutex
	payloads   map[string][]byte // by guid
	deliveries []ghDelivery      // newest first
	requests   []string
	answers    []int // the receiver's answers to redeliveries
}

func newFakeGitHub(hook, receiver, secret string, auth func(r *http.Request) bool) *fakeGitHub {
	return &fakeGitHub{hook: hook, auth: auth, receiver: receiver, secret: secret, payloads: map[string][]byte{}}
}

// add lists a delivery of guid (its first, or a redelivery) made at at,
// which the receiver answered status.
func (f *fakeGitHub) add(guid string, at time.Time, redelivery bool, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.payloads[guid] == nil {
		f.payloads[guid] = fmt.Appendf(nil, `{"action":"opened","issue":{"number":%d},"repository":{"full_name":"octo/hello"}}`, len(f.payloads)+1)
	}
	id := int64(len(f.deliveries) + 1)
	text := "OK"
	if status != http.StatusOK {
		text = "Invalid HTTP Response: " + strconv.Itoa(status)
	}
	d := ghDelivery{ID: id, GUID: guid, DeliveredAt: at.UTC().Truncate(time.Second), Redelivery: redelivery, Duration: 0.3,
		Status: text, StatusCode: status, Event: "issues", Action: "opened"}
	// Newest first.
	i, _ := slices.BinarySearchFunc(f.deliveries, d, func(a, b ghDelivery) int { return b.DeliveredAt.Compare(a.DeliveredAt) })
	f.deliveries = slices.Insert(f.deliveries, i, d)
}

// headers are the headers GitHub sends with guid's payload.
func (f *fakeGitHub) headers(guid string, body []byte) http.Header {
	return http.Header{
		"X-Hub-Signature-256": {sign.GitHub(f.secret, body)},
		"X-Github-Delivery":   {guid},
		"X-Github-Event":      {"issues"},
		"X-Github-Hook-Id":    {"1"},
		"User-Agent":          {"GitHub-Hookshot/test"},
		"Content-Type":        {"application/json"},
	}
}

func (f *fakeGitHub) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
	n := len(f.requests)
	f.mu.Unlock()
	switch {
	case r.Header.Get("X-GitHub-Api-Version") == "" || r.Header.Get("Accept") != "application/vnd.github+json":
		http.Error(rw, `{"message":"missing API version or Accept"}`, http.StatusBadRequest)
	case !f.auth(r):
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte(`{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`))
	case f.fail.answer(rw, n):
	case r.Method == http.MethodGet && r.URL.Path == f.hook+"/deliveries":
		f.list(rw, r)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, f.hook+"/deliveries/") && strings.HasSuffix(r.URL.Path, "/attempts"):
		f.redeliver(rw, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, f.hook+"/deliveries/"), "/attempts"))
	default:
		http.NotFound(rw, r)
	}
}

func (f *fakeGitHub) list(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	start := 0
	if c := q.Get("cursor"); c != "" {
		start, _ = strconv.Atoi(strings.TrimPrefix(c, "v1_"))
	}
	f.mu.Lock()
	end := min(start+perPage, len(f.deliveries))
	page := slices.Clone(f.deliveries[start:end])
	more := end < len(f.deliveries)
	f.mu.Unlock()
	if more {
		next := fmt.Sprintf("http://%s%s/deliveries?per_page=%d&cursor=v1_%d", r.Host, f.hook, perPage, end)
		rw.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <http://%s%s/deliveries?per_page=%d>; rel="first"`, next, r.Host, f.hook, perPage))
	}
	_ = json.NewEncoder(rw).Encode(page)
}

func (f *fakeGitHub) redeliver(rw http.ResponseWriter, id string) {
	f.mu.Lock()
	i := slices.IndexFunc(f.deliveries, func(d ghDelivery) bool { return strconv.FormatInt(d.ID, 10) == id })
	var d ghDelivery
	if i >= 0 {
		d = f.deliveries[i]
	}
	body := f.payloads[d.GUID]
	f.mu.Unlock()
	switch {
	case i < 0:
		http.Error(rw, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	case time.Since(d.DeliveredAt) > 72*time.Hour:
		http.Error(rw, `{"message":"Validation Failed"}`, http.StatusUnprocessableEntity)
		return
	}
	status, err := deliver(f.receiver, f.headers(d.GUID, body), body)
	if err != nil {
		status = 0
	}
	f.mu.Lock()
	f.answers = append(f.answers, status)
	f.mu.Unlock()
	f.add(d.GUID, time.Now(), true, status)
	rw.WriteHeader(http.StatusAccepted)
	_, _ = rw.Write([]byte(`{}`))
}

// bearer checks a token.
func bearer(token string) func(r *http.Request) bool {
	return func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }
}

func setupGitHub(t *testing.T, hook string, auth func(r *http.Request) bool) (*inbox, *fakeGitHub, *httptest.Server) {
	t.Helper()
	in := setupInbox(t, config.SourceConfig{Name: "gh", Provider: "github", Secrets: []config.Secret{githubSecret}})
	fake := newFakeGitHub(hook, in.url+"/webhooks/gh", githubSecret, auth)
	server := httptest.NewServer(fake)
	t.Cleanup(server.Close)
	return in, fake, server
}

func TestGitHubReconciliation(t *testing.T) {
	t.Parallel()

	t.Run("RedeliversExactlyTheMissingDeliveries", func(t *testing.T) {
		t.Parallel()
		in, fake, server := setupGitHub(t, "/repos/octo/hello/hooks/1", bearer(githubToken))
		now := time.Now()
		ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
		fake.add("g6", now.Add(-96*time.Hour), false, http.StatusBadGateway) // beyond GitHub's 3 days
		fake.add("g5", ago(90), false, http.StatusBadGateway)
		fake.add("g1", ago(80), false, http.StatusOK)
		fake.add("g2", ago(70), false, http.StatusBadGateway)
		fake.add("g3", ago(60), false, http.StatusOK)        // answered 2xx, yet not in the inbox
		fake.add("g4", ago(50), false, 0)                    // timed out at GitHub, yet stored
		fake.add("g2", ago(40), true, http.StatusBadGateway) // a manual redelivery that failed too
		for _, m := range []int{30, 20, 10} {
			fake.add("g5", ago(m), true, http.StatusBadGateway) // redelivered in vain, three times
		}
		for _, guid := range []string{"g1", "g4"} {
			in.post(t, "gh", fake.headers(guid, fake.payloads[guid]), fake.payloads[guid])
		}
		fake.fail = failures{2: http.StatusTooManyRequests}
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
		require.Equal(t, []int{http.StatusOK, http.StatusOK}, fake.answers, "both redeliveries passed the receiver's verifier")
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
		}, fake.requests)

		// A second run finds nothing missing (but g5, still left alone).
		res, err = g.Reconcile(context.Background(), reconcile.Window{Since: now.Add(-2 * time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 5, Duplicates: 4, Abandoned: []string{"g5"}}, counts(res))
		require.Len(t, fake.answers, 2)
		require.Equal(t, 4, in.jobs(t))
	})

	t.Run("ARedeliveryMustPassTheVerifier", func(t *testing.T) {
		t.Parallel()
		in, fake, server := setupGitHub(t, "/orgs/octo/hooks/7", bearer(githubToken))
		fake.secret = "not the source's secret"
		fake.add("g1", time.Now().Add(-time.Minute), false, http.StatusBadGateway)
		g, err := reconcile.NewGitHub(&reconcile.GitHubConfig{Hook: "orgs/octo/hooks/7", Token: githubToken, BaseURL: server.URL})
		require.NoError(t, err)
		res, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 1, Redelivered: 1}, counts(res))
		require.Equal(t, []int{http.StatusUnauthorized}, fake.answers)
		require.Empty(t, in.eventIDs(t, "gh"), "reconciliation stores nothing itself")
	})

	t.Run("AnAppAuthenticatesWithAJWT", func(t *testing.T) {
		t.Parallel()
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		in, fake, server := setupGitHub(t, "/app/hook", appJWT(t, &key.PublicKey))
		fake.add("g1", time.Now().Add(-2*time.Minute), false, http.StatusOK)
		fake.add("g2", time.Now().Add(-time.Minute), false, http.StatusInternalServerError)
		in.post(t, "gh", fake.headers("g1", fake.payloads["g1"]), fake.payloads["g1"])
		pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		parsed, err := reconcile.ParseRSAPrivateKey(pemKey)
		require.NoError(t, err)
		g, err := reconcile.NewGitHub(&reconcile.GitHubConfig{Hook: "app", AppID: githubAppID, PrivateKey: parsed, BaseURL: server.URL})
		require.NoError(t, err)
		res, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, reconcile.Known(in.store, "gh"), false)
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 2, Duplicates: 1, Redelivered: 1}, counts(res))
		require.Equal(t, []string{"g1", "g2"}, in.eventIDs(t, "gh"))
		require.Equal(t, "POST /app/hook/deliveries/2/attempts", fake.requests[len(fake.requests)-1])

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
