package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/natstest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// consumer is the user's billing service. It verifies each delivery with
// the Standard Webhooks reference library, applies it (counts it), and
// loses the answer to the first delivery of every message (500 after
// applying it), so that the relay sends it again. It deduplicates by
// webhook-id, as the docs tell consumers to.
type consumer struct {
	mu       sync.Mutex
	requests map[string]int // deliveries by key, re-sends included
	applied  map[string]int // effective messages by key, after deduplication
	bad      int
}

func (c *consumer) serve(wh *standardwebhooks.Webhook) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		defer c.mu.Unlock()
		if err := wh.Verify(body, r.Header); err != nil {
			c.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		key := r.Header.Get("webhook-id")
		c.requests[key]++
		if c.applied[key] == 0 { // deduplicate by key
			c.applied[key]++
		}
		if c.requests[key] == 1 {
			w.WriteHeader(http.StatusInternalServerError) // the answer is lost
		}
	}
}

// TestForwardEndToEnd: signed deliveries, each sent three times at once,
// go through the receiver, the worker's forward route and the outbox relay
// to an HTTP destination and a NATS JetStream stream, from configuration
// alone. The receiver keeps one event per id; the outbox one message per
// event and destination; the relay re-sends the HTTP messages whose answer
// was lost; the HTTP consumer, deduplicating by webhook-id, applies exactly
// one message per event, and the stream holds one message per event.
func TestForwardEndToEnd(t *testing.T) {
	t.Parallel()
	const events, copies = 10, 3
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	billing := &consumer{requests: map[string]int{}, applied: map[string]int{}}
	sink := httptest.NewServer(billing.serve(wh))
	t.Cleanup(sink.Close)

	natsURL := natstest.URL(t)
	stream, prefix := natstest.Stream(t, natsURL)

	db := dbtest.New(t)
	cfg := &config.Config{
		Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
		Sources:  []config.SourceConfig{{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret}}},
		Worker: config.WorkerConfig{
			Listen: "127.0.0.1:0", Concurrency: 4,
			Outbox: config.OutboxConfig{Relay: config.OutboxRelayConfig{Config: relay.Config{PollInterval: 20 * time.Millisecond}}},
			Destinations: map[string]config.DestinationConfig{
				"billing": {Kind: config.DestinationHTTP, URL: config.SecretURL(sink.URL), Secret: secret,
					DestinationConfig: relay.DestinationConfig{BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}},
				"feed": {Kind: config.DestinationNATS, URL: config.SecretURL(natsURL), Stream: stream, Subjects: []string{prefix + ".>"}, CreateStream: true,
					Subject: prefix + ".{source}.{type}"},
			},
			Config: worker.Config{Routes: []worker.Route{{Source: "bank", Types: []string{"account.*"}, Handlers: []string{"forward"},
				Destinations: []string{"billing", "feed"}}}},
		},
	}
	cfg.ApplyDefaults()
	require.NoError(t, cfg.Validate())
	env := &daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool}
	srv, stop, err := daemon.NewReceiver(env)
	require.NoError(t, err)
	t.Cleanup(stop)
	url := serveReceiver(t, srv)
	w, err := daemon.NewWorker(env, nil)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, w.Stop(context.Background())) })

	var wg sync.WaitGroup
	for i := range events {
		body := fmt.Sprintf(`{"type":"account.deposit","data":{"account_id":"acc_%d","amount":"1.00"}}`, i)
		for range copies {
			header, err := webhook.Headers(&webhook.Params{
				Provider: "standardwebhooks", Secret: secret, EventID: fmt.Sprintf("msg_%d", i), Time: time.Now(), Body: []byte(body),
			})
			require.NoError(t, err)
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/bank", strings.NewReader(body))
				req.Header = header
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("delivery answered %d", resp.StatusCode)
				}
			})
		}
	}
	wg.Wait()

	waitFor(t, "every message delivered", func() bool {
		var delivered int
		require.NoError(t, db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM hookinbox_outbox WHERE status = 'delivered'`).Scan(&delivered))
		return delivered == 2*events
	})
	billing.mu.Lock()
	defer billing.mu.Unlock()
	require.Zero(t, billing.bad, "a delivery failed Standard Webhooks verification")
	require.Len(t, billing.applied, events)
	sent := 0
	for i := range events {
		key := fmt.Sprintf("bank:msg_%d:billing", i)
		require.Equal(t, 1, billing.applied[key], key)
		require.Equal(t, 2, billing.requests[key], "%s: the lost answer made the relay send it again, once", key)
		sent += billing.requests[key]
	}
	t.Logf("%d events x %d deliveries -> %d outbox messages per destination -> %d HTTP requests -> %d effective messages", events, copies, events, sent, len(billing.applied))

	// The NATS consumer: one message per event in the stream, on the
	// event's subject, with Nats-Msg-Id = the key.
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, events, info.State.Msgs)
	msg, err := s.GetMsg(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, prefix+".bank.account.deposit", msg.Subject)
	require.Regexp(t, `^bank:msg_\d+:feed$`, msg.Header.Get(nats.MsgIdHdr))
}
