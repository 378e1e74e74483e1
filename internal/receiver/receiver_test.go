package receiver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

const (
	bankSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stripeSecret = "whsec_test_secret"
)

type testBundle struct {
	db  *dbtest.DB
	url string
}

// setup serves a receiver over real HTTP on loopback, backed by pool.
func setup(t *testing.T, pool *pgxpool.Pool, ackTimeout time.Duration) string {
	t.Helper()
	return setupWith(t, pool, ackTimeout, nil)
}

// setupWith is setup with the receiver's config changed by mutate.
func setupWith(t *testing.T, pool *pgxpool.Pool, ackTimeout time.Duration, mutate func(*receiver.Config)) string {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(pool, client, &inboxstore.IngesterConfig{})
	source := func(name, prov, secret string, limit int64) receiver.Source {
		v, err := provider.New(prov, &provider.Config{Secrets: []string{secret}})
		require.NoError(t, err)
		return receiver.Source{Name: name, Provider: prov, Verifier: v, MaxBodyBytes: limit, AckTimeout: ackTimeout}
	}
	cfg := &receiver.Config{
		Sources: []receiver.Source{
			source("bank", "standardwebhooks", bankSecret, 1024),
			source("stripe", "stripe", stripeSecret, 1024),
		},
		ServerConfig: component.ServerConfig{RetryAfter: 7 * time.Second},
	}
	if mutate != nil {
		mutate(cfg)
	}
	srv, err := receiver.New(ingester, cfg)
	require.NoError(t, err)
	return serve(t, srv)
}

// serve serves srv's handler on a loopback port until the test ends and
// returns its base URL.
func serve(t *testing.T, srv interface{ Handler() http.Handler }) string {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

func setupDB(t *testing.T) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	return &testBundle{db: db, url: setup(t, db.Pool, 4*time.Second)}
}

type reply struct {
	status     int
	retryAfter string
	body       map[string]any
}

func post(t *testing.T, url, source string, header http.Header, body string) reply {
	t.Helper()
	r, err := tryPost(url, source, header, body)
	require.NoError(t, err)
	return r
}

// tryPost is post for goroutines other than the test's, which must not
// call require: it returns what went wrong instead.
func tryPost(url, source string, header http.Header, body string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/"+source, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		return reply{}, fmt.Errorf("body %q: %w", raw, err)
	}
	return r, nil
}

// answer is a reply, or the error that stopped a tryPost.
type answer struct {
	reply
	err error
}

func signBank(t *testing.T, id, body string, at time.Time) http.Header {
	t.Helper()
	h, err := webhook.Headers(&webhook.Params{
		Provider: "standardwebhooks", Secret: bankSecret, EventID: id, Time: at, Body: []byte(body),
	})
	require.NoError(t, err)
	return h
}

const deposit = `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"12.34"}}`

func rowCounts(t *testing.T, db *dbtest.DB) (rows, jobs int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox`).Scan(&rows))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs))
	return rows, jobs
}

func TestReceiver(t *testing.T) {
	t.Parallel()

	t.Run("AuthenticDeliveryIsCommittedThenAcknowledged", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		r := post(t, b.url, "bank", signBank(t, "msg_1", deposit, time.Now()), deposit)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, map[string]any{"new": 1.0, "duplicates": 0.0, "twins": 0.0}, r.body)

		var ev inbox.Event
		err := b.db.Pool.QueryRow(context.Background(),
			`SELECT source, provider, event_id, event_type, payload, body, headers, status
FROM webhook_inbox JOIN webhook_inbox_delivery ON inbox_id = id`).
			Scan(&ev.Source, &ev.Provider, &ev.EventID, &ev.EventType, &ev.Payload, &ev.Body, &ev.Headers, &ev.Status)
		require.NoError(t, err)
		require.Equal(t, "bank", ev.Source)
		require.Equal(t, "standardwebhooks", ev.Provider)
		require.Equal(t, "msg_1", ev.EventID)
		require.Equal(t, "account.deposit", ev.EventType)
		require.JSONEq(t, deposit, string(ev.Payload))
		require.Equal(t, deposit, string(ev.Body))
		require.Equal(t, "msg_1", ev.Headers["Webhook-Id"])
		require.NotEmpty(t, ev.Headers["Webhook-Signature"])
		require.Equal(t, inbox.StatusPending, ev.Status)
		rows, jobs := rowCounts(t, b.db)
		require.Equal(t, 1, rows)
		require.Equal(t, 1, jobs)
	})

	t.Run("DuplicateIsAcknowledgedAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		require.Equal(t, http.StatusOK, post(t, b.url, "bank", signBank(t, "msg_1", deposit, time.Now()), deposit).status)
		// A provider retry carries a fresh timestamp and signature.
		r := post(t, b.url, "bank", signBank(t, "msg_1", deposit, time.Now().Add(-time.Minute)), deposit)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, map[string]any{"new": 0.0, "duplicates": 1.0, "twins": 0.0}, r.body)
		rows, jobs := rowCounts(t, b.db)
		require.Equal(t, 1, rows)
		require.Equal(t, 1, jobs)
	})

	t.Run("AnyContentTypeIsAccepted", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		h := signBank(t, "msg_1", deposit, time.Now())
		h.Set("Content-Type", "text/plain; charset=latin1")
		require.Equal(t, http.StatusOK, post(t, b.url, "bank", h, deposit).status)
	})

	t.Run("RejectionsWriteNothing", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		good := signBank(t, "msg_1", deposit, time.Now())
		cases := []struct {
			name   string
			method string
			source string
			header http.Header
			body   string
			status int
		}{
			{"UnknownSource", http.MethodPost, "nope", good, deposit, http.StatusNotFound},
			{"WrongMethod", http.MethodGet, "bank", good, "", http.StatusMethodNotAllowed},
			{"TooLarge", http.MethodPost, "bank", signBank(t, "msg_big", strings.Repeat("x", 1025), time.Now()), strings.Repeat("x", 1025), http.StatusRequestEntityTooLarge},
			{"WrongSignature", http.MethodPost, "bank", signBank(t, "msg_1", deposit+" ", time.Now()), deposit, http.StatusUnauthorized},
			{"MissingSignature", http.MethodPost, "bank", http.Header{}, deposit, http.StatusUnauthorized},
			{"StaleTimestamp", http.MethodPost, "bank", signBank(t, "msg_1", deposit, time.Now().Add(-6*time.Minute)), deposit, http.StatusUnauthorized},
			{"FutureTimestamp", http.MethodPost, "bank", signBank(t, "msg_1", deposit, time.Now().Add(6*time.Minute)), deposit, http.StatusUnauthorized},
		}
		for _, tc := range cases {
			req, err := http.NewRequest(tc.method, b.url+"/webhooks/"+tc.source, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header = tc.header
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode, tc.name)
			require.NotContains(t, string(raw), bankSecret, tc.name)
		}
		rows, jobs := rowCounts(t, b.db)
		require.Zero(t, rows)
		require.Zero(t, jobs)
	})

	t.Run("UnparseableAuthenticDeliveryIsRecordedFailed", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		body := "this is not json"
		h := http.Header{"Stripe-Signature": {sign.Stripe(stripeSecret, time.Now(), []byte(body))}}
		r := post(t, b.url, "stripe", h, body)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, 1.0, r.body["new"])

		var eventID, status, lastError string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT event_id, status, last_error FROM webhook_inbox`).Scan(&eventID, &status, &lastError))
		sum := sha256.Sum256([]byte(body))
		require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), eventID)
		require.Equal(t, "failed", status)
		require.Contains(t, lastError, "unparseable")
		_, jobs := rowCounts(t, b.db)
		require.Zero(t, jobs)

		// The provider resends it: still one row.
		h = http.Header{"Stripe-Signature": {sign.Stripe(stripeSecret, time.Now(), []byte(body))}}
		r = post(t, b.url, "stripe", h, body)
		require.Equal(t, map[string]any{"new": 0.0, "duplicates": 1.0, "twins": 0.0}, r.body)
	})

	t.Run("NULInJSONIsRecordedFailed", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		body := `{"type":"account.deposit","data":{"account_id":"acc\u0000"}}`
		r := post(t, b.url, "bank", signBank(t, "msg_nul", body, time.Now()), body)
		require.Equal(t, http.StatusOK, r.status)
		var eventID, status string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT event_id, status FROM webhook_inbox`).Scan(&eventID, &status))
		require.Equal(t, "msg_nul", eventID)
		require.Equal(t, "failed", status)
	})

	t.Run("ConcurrentIdenticalDeliveriesMakeOneRowAndOneJob", func(t *testing.T) {
		t.Parallel()
		b := setupDB(t)
		const n = 50
		var wg sync.WaitGroup
		statuses := make(chan answer, n)
		start := make(chan struct{})
		for i := range n {
			h := signBank(t, "msg_storm", deposit, time.Now().Add(-time.Duration(i)*time.Second))
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := tryPost(b.url, "bank", h, deposit)
				statuses <- answer{r, err}
			}()
		}
		close(start)
		wg.Wait()
		close(statuses)
		newCount := 0
		for r := range statuses {
			require.NoError(t, r.err)
			require.Equal(t, http.StatusOK, r.status)
			newCount += int(r.body["new"].(float64))
		}
		require.Equal(t, 1, newCount)
		rows, jobs := rowCounts(t, b.db)
		require.Equal(t, 1, rows)
		require.Equal(t, 1, jobs)
	})

	t.Run("DatabaseDownGives503WithRetryAfter", func(t *testing.T) {
		t.Parallel()
		// A port nothing listens on: the database is unreachable.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+addr+"/postgres?connect_timeout=2")
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		url := setup(t, pool, 4*time.Second)
		r := post(t, url, "bank", signBank(t, "msg_1", deposit, time.Now()), deposit)
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, "7", r.retryAfter)
	})

	t.Run("AckTimeoutBeforeCommitGives503AndNothingLands", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		url := setup(t, db.Pool, 300*time.Millisecond)
		ctx := context.Background()
		// Another transaction holds the key: the receiver's claim must wait
		// for it, past its ack timeout.
		blocker, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = blocker.Exec(ctx, `INSERT INTO webhook_inbox (source, provider, event_id) VALUES ('bank', 'x', 'msg_1')`)
		require.NoError(t, err)

		r := post(t, url, "bank", signBank(t, "msg_1", deposit, time.Now()), deposit)
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.NotEmpty(t, r.retryAfter)
		// The timed-out claim was cancelled: it no longer waits for the key
		// (it would take it, and commit, the moment the blocker let go; on a
		// busy machine the cancel can reach the server after the 503).
		db.WaitForLockWaiters(t, 0)
		require.NoError(t, blocker.Rollback(ctx))

		rows, jobs := rowCounts(t, db)
		require.Zero(t, rows)
		require.Zero(t, jobs)
		// The provider's retry then lands. On a busy machine a retry's claim
		// can itself outlast the 300 ms ack timeout: it answers 503, and the
		// provider retries again. Such a retry's commit may still land when
		// the timeout met it already sent (a 503 promises nothing either
		// way; a 2xx promises the commit): the retry after it is then a
		// duplicate. Either way the event is stored once, with one job.
		retried503 := false
		for deadline := time.Now().Add(time.Minute); ; <-time.After(50 * time.Millisecond) {
			r = post(t, url, "bank", signBank(t, "msg_1", deposit, time.Now()), deposit)
			if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				break
			}
			retried503 = true
		}
		require.Equal(t, http.StatusOK, r.status)
		if !retried503 {
			require.Equal(t, 1.0, r.body["new"])
		}
		rows, jobs = rowCounts(t, db)
		require.Equal(t, 1, rows)
		require.Equal(t, 1, jobs)
	})
}

func TestReceiverLimits(t *testing.T) {
	t.Parallel()

	t.Run("BeyondMaxInFlightGives503AtOnceAndTheRetryLands", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		url := setupWith(t, db.Pool, time.Minute, func(c *receiver.Config) { c.MaxInFlight = 1 })
		ctx := context.Background()
		// Another transaction holds msg_1's key, so the first delivery
		// waits in its claim, holding the only slot.
		blocker, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = blocker.Exec(ctx, `INSERT INTO webhook_inbox (source, provider, event_id) VALUES ('bank', 'x', 'msg_1')`)
		require.NoError(t, err)
		first := make(chan answer, 1)
		h := signBank(t, "msg_1", deposit, time.Now())
		go func() {
			r, err := tryPost(url, "bank", h, deposit)
			first <- answer{r, err}
		}()
		db.WaitForLockWaiters(t, 1) // the first delivery waits on the held key

		r := post(t, url, "bank", signBank(t, "msg_2", deposit, time.Now()), deposit)
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, "7", r.retryAfter)
		require.Equal(t, "not stored; retry later", r.body["error"])

		require.NoError(t, blocker.Rollback(ctx))
		a := <-first
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status)
		require.Equal(t, 1.0, a.body["new"])
		// The slot is free again: the provider's retry lands.
		r = post(t, url, "bank", signBank(t, "msg_2", deposit, time.Now()), deposit)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, 1.0, r.body["new"])
		rows, jobs := rowCounts(t, db)
		require.Equal(t, 2, rows)
		require.Equal(t, 2, jobs)
	})

	t.Run("BodyThatTricklesPastTheAckTimeoutGives408", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		url := setup(t, db.Pool, 300*time.Millisecond)
		// A client that sends half of its body and then stalls.
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.Close() })
		req, err := http.NewRequest(http.MethodPost, url+"/webhooks/bank", pr)
		require.NoError(t, err)
		req.Header = signBank(t, "msg_slow", deposit, time.Now())
		req.ContentLength = int64(len(deposit))
		go func() { _, _ = pw.Write([]byte(deposit[:10])) }()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		rows, _ := rowCounts(t, db)
		require.Zero(t, rows)
	})
}

func TestProbes(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(b.url + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}

// TestChunkedBodyAtTheLimit reads bodies of unknown length (chunked) with
// the smallest budget the receiver accepts for its 1 KiB sources: one
// client's half of it must hold a body at the limit, and the one byte more
// that tells it ends there.
func TestChunkedBodyAtTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 1024
	db := dbtest.New(t)
	url := setupWith(t, db.Pool, 4*time.Second, func(c *receiver.Config) { c.MaxUnverifiedBytes = 2 * (limit + 1) })

	post := func(size int) int {
		req, err := http.NewRequest(http.MethodPost, url+"/webhooks/bank", strings.NewReader(strings.Repeat("x", size)))
		require.NoError(t, err)
		req.ContentLength = -1 // unknown: sent chunked
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, post(limit), "read whole, then refused for its signature")
	require.Equal(t, http.StatusRequestEntityTooLarge, post(limit+1))

	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	verifier, err := provider.New("standardwebhooks", &provider.Config{Secrets: []string{bankSecret}})
	require.NoError(t, err)
	_, err = receiver.New(inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}), &receiver.Config{
		Sources:      []receiver.Source{{Name: "bank", Verifier: verifier, MaxBodyBytes: limit, AckTimeout: time.Second}},
		ServerConfig: component.ServerConfig{MaxUnverifiedBytes: 2 * limit},
	})
	require.ErrorContains(t, err, "over half the unverified-body budget")
}
