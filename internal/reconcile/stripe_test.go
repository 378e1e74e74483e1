package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/providerapi"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

const testKey = "rk_test_reconcile_key"

type bundle struct {
	db       *dbtest.DB
	ingester *inboxstore.Ingester
	parser   reconcile.EventParser
	fake     *providerapi.Stripe
	server   *httptest.Server
	waits    []time.Duration
}

func setup(t *testing.T, fake *providerapi.Stripe) *bundle {
	t.Helper()
	db := dbtest.New(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	parser, err := reconcile.StripeParser(&provider.Config{Secrets: []string{"whsec_x"}})
	require.NoError(t, err)
	server := httptest.NewServer(fake)
	t.Cleanup(server.Close)
	return &bundle{db: db, ingester: inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}), parser: parser, fake: fake, server: server}
}

func (b *bundle) fetcher(t *testing.T, pageSize int) *reconcile.Stripe {
	t.Helper()
	f, err := reconcile.NewStripe(&reconcile.StripeConfig{
		APIKey: testKey, BaseURL: b.server.URL, Parser: b.parser, PageSize: pageSize, HTTPClient: b.server.Client(),
		Sleep: func(_ context.Context, d time.Duration) error { b.waits = append(b.waits, d); return nil },
	})
	require.NoError(t, err)
	return f
}

// deliver claims ev as the receiver would have from its webhook.
func (b *bundle) deliver(t *testing.T, ev providerapi.StripeEvent) {
	t.Helper()
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	parsed := b.parser.ParseEvent(body)
	_, err = b.ingester.Ingest(context.Background(), &inboxstore.Delivery{
		Source: "stripe", Provider: "stripe", Body: body,
		Events: []inboxstore.IncomingEvent{{ID: parsed.ID, Type: parsed.Type, Payload: parsed.Payload, TwinKey: parsed.TwinKey}},
	})
	require.NoError(t, err)
}

func (b *bundle) rows(t *testing.T) (ids []string, jobs int) {
	t.Helper()
	ctx := context.Background()
	rows, err := b.db.Pool.Query(ctx, `SELECT event_id FROM webhook_inbox ORDER BY event_id`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, inboxstore.JobKind).Scan(&jobs))
	return ids, jobs
}

func TestStripeReconciliation(t *testing.T) {
	t.Parallel()
	now := time.Now()

	t.Run("InsertsExactlyTheMissingEvents", func(t *testing.T) {
		t.Parallel()
		fake := &providerapi.Stripe{Key: testKey, RateLimit: map[int]bool{2: true}}
		// Newest first, as Stripe lists them; evt_old is outside the window.
		for i := 9; i >= 1; i-- {
			fake.Events = append(fake.Events, providerapi.NewStripeEvent(fmt.Sprintf("evt_%d", i), "payment_intent.created", now.Add(-time.Duration(10-i)*time.Minute), fmt.Sprintf("pi_%d", i)))
		}
		fake.Events = append(fake.Events, providerapi.NewStripeEvent("evt_old", "payment_intent.created", now.Add(-3*time.Hour), "pi_old"))
		b := setup(t, fake)
		// The webhooks brought 1, 4, 5 and 9; the others were missed.
		for _, ev := range fake.Events {
			if slices.Contains([]string{"evt_1", "evt_4", "evt_5", "evt_9"}, ev.ID) {
				b.deliver(t, ev)
			}
		}

		res, err := reconcile.Run(context.Background(), &reconcile.Params{
			Source: "stripe", Provider: "stripe", Fetcher: b.fetcher(t, 4), Since: now.Add(-time.Hour), Claimer: b.ingester,
		})
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 9, New: 5, Duplicates: 4}, counts(res))
		require.Equal(t, []string{"evt_8", "evt_7", "evt_6", "evt_3", "evt_2"}, missingIDs(res))
		ids, jobs := b.rows(t)
		require.Equal(t, []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5", "evt_6", "evt_7", "evt_8", "evt_9"}, ids)
		require.Equal(t, 9, jobs, "one job per event: the missing ones got theirs from reconciliation, no event got two")

		// Three pages of 4, 4 and 1; the second was rate-limited once, and
		// the retry waited the Retry-After the 429 named.
		require.Equal(t, []time.Duration{2 * time.Second}, b.waits)
		require.Len(t, fake.Requests, 4)
		require.Contains(t, fake.Requests[2], "starting_after=evt_6")
		require.Equal(t, fake.Requests[1], fake.Requests[2], "the rate-limited page is asked again as it was")
		require.Contains(t, fake.Requests[3], "starting_after=evt_2")

		// A second run finds nothing missing.
		again, err := reconcile.Run(context.Background(), &reconcile.Params{
			Source: "stripe", Provider: "stripe", Fetcher: b.fetcher(t, 100), Since: now.Add(-time.Hour), Claimer: b.ingester,
		})
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 9, Duplicates: 9}, counts(again))
		_, jobs = b.rows(t)
		require.Equal(t, 9, jobs)
	})

	t.Run("ReconciledRowIsKeyedLikeItsWebhook", func(t *testing.T) {
		t.Parallel()
		// A twin type: the listed event carries the twin key the webhook's
		// row would, so a resend of the same intent under another id stays out.
		fake := &providerapi.Stripe{Key: testKey, Events: []providerapi.StripeEvent{providerapi.NewStripeEvent("evt_a", "payment_intent.succeeded", now, "pi_1")}}
		b := setup(t, fake)
		b.deliver(t, providerapi.NewStripeEvent("evt_b", "payment_intent.succeeded", now, "pi_1"))
		res, err := reconcile.Run(context.Background(), &reconcile.Params{
			Source: "stripe", Provider: "stripe", Fetcher: b.fetcher(t, 100), Since: now.Add(-time.Hour), Claimer: b.ingester,
		})
		require.NoError(t, err)
		require.Equal(t, &reconcile.Result{Fetched: 1, Twins: 1}, counts(res))
		ids, _ := b.rows(t)
		require.Equal(t, []string{"evt_b"}, ids)
	})

	t.Run("WrongKeyFailsWithStripesMessage", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &providerapi.Stripe{Key: testKey})
		f, err := reconcile.NewStripe(&reconcile.StripeConfig{APIKey: "rk_wrong", BaseURL: b.server.URL, Parser: b.parser})
		require.NoError(t, err)
		_, err = reconcile.Run(context.Background(), &reconcile.Params{Source: "stripe", Provider: "stripe", Fetcher: f, Since: now, Claimer: b.ingester})
		require.ErrorContains(t, err, "answered 401: Invalid API Key provided")
		require.NotContains(t, err.Error(), "rk_wrong")
	})

	t.Run("ReschedulesAfterMaxRetries", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &providerapi.Stripe{Key: testKey, RateLimit: map[int]bool{1: true, 2: true, 3: true}})
		f, err := reconcile.NewStripe(&reconcile.StripeConfig{
			APIKey: testKey, BaseURL: b.server.URL, Parser: b.parser, MaxRetries: 2,
			Sleep: func(_ context.Context, d time.Duration) error { b.waits = append(b.waits, d); return nil },
		})
		require.NoError(t, err)
		_, err = reconcile.Run(context.Background(), &reconcile.Params{Source: "stripe", Provider: "stripe", Fetcher: f, Since: now, Claimer: b.ingester})
		var limited *reconcile.RateLimitedError
		require.ErrorAs(t, err, &limited, "a rate limit past the retries reschedules the run, not fails it")
		require.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second}, b.waits)
	})
}
