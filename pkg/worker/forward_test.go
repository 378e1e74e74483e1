package worker_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// forwardSecret signs the forwarded deliveries.
const forwardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// billingSink is the user's service: it verifies each delivery with the
// Standard Webhooks reference library and counts them by webhook-id.
type billingSink struct {
	mu       sync.Mutex
	received map[string]int
	bodies   map[string]string
	bad      int
}

func newBillingSink(t *testing.T) (*billingSink, string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(forwardSecret)
	require.NoError(t, err)
	s := &billingSink{received: map[string]int{}, bodies: map[string]string{}}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := wh.Verify(body, r.Header); err != nil {
			s.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		s.received[r.Header.Get("webhook-id")]++
		s.bodies[r.Header.Get("webhook-id")] = string(body)
	}))
	t.Cleanup(server.Close)
	return s, server.URL
}

func (s *billingSink) snapshot() (map[string]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.received))
	for k, v := range s.received {
		out[k] = v
	}
	return out, s.bad
}

// TestForward routes events to an HTTP destination from configuration
// alone: the forward handler enqueues each event in its transaction, the
// relay in the worker delivers it signed. A handler failure after forward
// rolls the message back with the rest; a redelivered event is not
// forwarded twice; the route's filter skips what it does not match.
func TestForward(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sink, url := newBillingSink(t)
	dest, err := relay.NewHTTP(&relay.HTTPConfig{URL: url, Secret: forwardSecret})
	require.NoError(t, err)
	b.flakyFailures.Store(math.MaxInt32)
	b.start(t, func(c *worker.Config) {
		c.Routes = []worker.Route{{
			Source: "bank", Types: []string{"invoice.*"}, Handlers: []string{"forward", "flaky"},
			Filter:       []worker.Condition{{Path: "data.currency", In: []string{"usd", "eur"}}},
			Destinations: []string{"billing"},
		}}
		c.Outbox = &relay.Config{PollInterval: 20 * time.Millisecond, Destinations: map[string]*relay.DestinationConfig{
			"billing": {Destination: dest},
		}}
	})
	usd := b.ingestPayload(t, "evt_usd", "invoice.paid", map[string]any{"data": map[string]any{"currency": "usd"}})
	gbp := b.ingestPayload(t, "evt_gbp", "invoice.paid", map[string]any{"data": map[string]any{"currency": "gbp"}})
	// A redelivery of evt_usd: the inbox drops it.
	res, err := b.ingester.Ingest(context.Background(), &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
		Events: []inboxstore.IncomingEvent{{ID: "evt_usd", Type: "invoice.paid", Payload: []byte(`{"data":{"currency":"usd"}}`)}}})
	require.NoError(t, err)
	require.Equal(t, 0, res.New)

	require.Contains(t, b.waitStatus(t, gbp, inbox.StatusDone).Note, "filter")
	// While "flaky" fails, the forward's message rolls back with it, every
	// attempt until the event fails.
	failed := b.waitStatus(t, usd, inbox.StatusFailed)
	var queued int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM hookinbox_outbox`).Scan(&queued))
	require.Zero(t, queued, "a rolled-back handler left a message")

	// River records the job's end after the row's: retry it once discarded.
	require.Equal(t, "discarded", b.jobState(t, usd))
	b.flakyFailures.Store(0)
	_, err = b.client.JobRetry(context.Background(), failed.JobID)
	require.NoError(t, err)
	b.waitStatus(t, usd, inbox.StatusDone)
	poll(t, 10*time.Second, "delivered", func() (bool, error) {
		got, _ := sink.snapshot()
		return got["bank:evt_usd:billing"] == 1, nil
	})
	got, bad := sink.snapshot()
	require.Zero(t, bad, "a delivery failed verification")
	require.Equal(t, map[string]int{"bank:evt_usd:billing": 1}, got)
	sink.mu.Lock()
	require.JSONEq(t, `{"data":{"currency":"usd"}}`, sink.bodies["bank:evt_usd:billing"])
	sink.mu.Unlock()
}
