package relay_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// testSecret is the destinations' Standard Webhooks secret.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// sink is a user's HTTP service: it verifies each request's Standard
// Webhooks signature, counts what it receives by key, and answers what
// status says (200 when nil).
type sink struct {
	server   *httptest.Server
	verifier provider.Verifier

	mu       sync.Mutex
	received map[string]int // by webhook-id
	requests int
	bad      []string // requests whose signature or Idempotency-Key was wrong
	status   func(n int, r *http.Request) (int, http.Header)
	arrived  map[string]time.Time // first arrival by key
	// hold, when set, holds every answer until it is closed (the request
	// counts as received, and processed, before).
	hold chan struct{}
}

func newSink(t *testing.T) *sink {
	t.Helper()
	v, err := provider.New("standardwebhooks", &provider.Config{Secrets: []string{testSecret}})
	require.NoError(t, err)
	s := &sink{verifier: v, received: map[string]int{}, arrived: map[string]time.Time{}}
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.server.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, verr := s.verifier.Verify(body, r.Header)
	s.mu.Lock()
	s.requests++
	n := s.requests
	status, header := http.StatusOK, http.Header(nil)
	if s.status != nil {
		status, header = s.status(n, r)
	}
	key := r.Header.Get("webhook-id")
	switch {
	case verr != nil:
		s.bad = append(s.bad, fmt.Sprintf("%s: %v", key, verr))
	case r.Header.Get("Idempotency-Key") != key:
		s.bad = append(s.bad, key+": Idempotency-Key differs")
	case status >= 200 && status < 300:
		s.received[key]++
		if _, ok := s.arrived[key]; !ok {
			s.arrived[key] = time.Now()
		}
	}
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}
	for k, vs := range header {
		w.Header()[k] = vs
	}
	w.WriteHeader(status)
}

// counts returns the accepted deliveries by key and the requests made.
func (s *sink) counts(t *testing.T) (map[string]int, int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.received))
	for k, v := range s.received {
		out[k] = v
	}
	require.Empty(t, s.bad, "requests with a bad signature or Idempotency-Key")
	return out, s.requests
}

func (s *sink) destination(t *testing.T) *relay.HTTP {
	t.Helper()
	d, err := relay.NewHTTP(&relay.HTTPConfig{URL: s.server.URL, Secret: testSecret, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return d
}

// enqueue commits n messages to destination, one per event, and returns
// their keys.
func enqueue(t *testing.T, db *dbtest.DB, destination string, from, n int) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // Committed below; a no-op then.
	keys := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		ev := &inbox.Event{Source: "shop", EventID: fmt.Sprintf("evt_%d", i), EventType: "order.paid"}
		queued, err := outbox.Enqueue(ctx, tx, ev, outbox.Message{
			Destination: destination, Payload: fmt.Appendf(nil, `{"type":"order.paid","n":%d}`, i),
		})
		require.NoError(t, err)
		require.True(t, queued)
		keys = append(keys, fmt.Sprintf("shop:evt_%d:%s", i, destination))
	}
	require.NoError(t, tx.Commit(ctx))
	return keys
}

// statusCounts returns the outbox's rows by status.
func statusCounts(t *testing.T, db *dbtest.DB) map[string]int {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT status, count(*) FROM hookinbox_outbox GROUP BY status`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// startRelay starts a relay with dests and stops it at the test's end.
func startRelay(t *testing.T, db *dbtest.DB, config *relay.Config) *relay.Relay {
	t.Helper()
	r, err := relay.New(db.Pool, config)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Stop(ctx))
	})
	return r
}

// waitFor polls cond until it holds, failing the test after 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, what)
}

// sinkCounter is a destination that only counts, for benchmarks.
type sinkCounter struct{ n atomic.Int64 }

func (s *sinkCounter) start(tb testing.TB) string {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.n.Add(1)
	}))
	tb.Cleanup(server.Close)
	return server.URL
}
