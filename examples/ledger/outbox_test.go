package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// retryNow retries a failed job at once.
type retryNow struct{}

func (retryNow) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

// TestDepositThroughTheOutbox is the seed's whole pattern: the inbox
// claim, the balance update and the outbox message commit in one
// transaction, then the relay publishes. While a later handler of the route
// fails, all three roll back: the row stays pending, the account is not
// credited, no message is queued. Once it succeeds, the feed receives one
// message, and a redelivery of the event changes nothing.
func TestDepositThroughTheOutbox(t *testing.T) {
	t.Parallel()
	db := ledgerDB(t)
	ctx := context.Background()

	var mu sync.Mutex
	received := map[string][]credited{}
	feed := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c credited
		if json.Unmarshal(body, &c) == nil {
			mu.Lock()
			received[r.Header.Get("webhook-id")] = append(received[r.Header.Get("webhook-id")], c)
			mu.Unlock()
		}
	}))
	t.Cleanup(feed.Close)
	dest, err := relay.NewHTTP(&relay.HTTPConfig{URL: feed.URL, Secret: bankSecret})
	require.NoError(t, err)

	var broken atomic.Bool
	broken.Store(true)
	registry := worker.NewRegistry(zaptest.NewLogger(t))
	registry.Register("ledger", Deposit)
	registry.Register("audit", func(context.Context, pgx.Tx, inbox.Event) error {
		if broken.Load() {
			return errors.New("audit log unavailable")
		}
		return nil
	})
	w, err := worker.New(db.Pool, &worker.Config{
		Queues:  map[string]int{river.QueueDefault: 2},
		Sources: map[string]string{"bank": river.QueueDefault},
		Routes: []worker.Route{{Source: "bank", Types: []string{"account.deposit"}, Handlers: []string{"ledger", "audit"},
			Destinations: []string{"feed"}}},
		Registry: registry,
		Logger:   zaptest.NewLogger(t),
		Outbox: &relay.Config{PollInterval: 20 * time.Millisecond, Destinations: map[string]*relay.DestinationConfig{
			"feed": {Destination: dest},
		}},
		RiverConfig: func(rc *river.Config) {
			rc.RetryPolicy = retryNow{}
			rc.FetchPollInterval = 20 * time.Millisecond
		},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(stopCtx))
	})

	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 25})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
	body := []byte(`{"type":"account.deposit","data":{"account_id":"acc_1","amount":"10.00"}}`)
	delivery := &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: body,
		Events: []inboxstore.IncomingEvent{{ID: "dep_1", Type: "account.deposit", Payload: body}}}
	res, err := ingester.Ingest(ctx, delivery)
	require.NoError(t, err)
	require.Equal(t, 1, res.New)
	id := res.Claimed[0].ID

	count := func(query string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, query).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool {
		return count(`SELECT attempts FROM webhook_inbox WHERE id = `+itoa(id)) >= 2
	}, 20*time.Second, 10*time.Millisecond, "two failed attempts")
	require.Zero(t, count(`SELECT count(*) FROM ledger_accounts`), "the account outlived its rolled-back transaction")
	require.Zero(t, count(`SELECT count(*) FROM ledger_entries`))
	require.Zero(t, count(`SELECT count(*) FROM hookinbox_outbox`), "the message outlived its rolled-back transaction")
	require.Equal(t, 1, count(`SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`))

	broken.Store(false)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received["bank:dep_1:feed"]) == 1
	}, 20*time.Second, 10*time.Millisecond, "the message was published")
	require.Equal(t, "10.00", balance(t, db, "acc_1"))
	require.Equal(t, 1, count(`SELECT count(*) FROM webhook_inbox WHERE status = 'done'`))

	res, err = ingester.Ingest(ctx, delivery)
	require.NoError(t, err)
	require.Zero(t, res.New, "a redelivery is a duplicate")
	require.Equal(t, 1, count(`SELECT count(*) FROM hookinbox_outbox`))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []credited{{Type: "account.credited", AccountID: "acc_1", Amount: "10.00", Balance: "10.00", EventID: "dep_1"}},
		received["bank:dep_1:feed"])
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
