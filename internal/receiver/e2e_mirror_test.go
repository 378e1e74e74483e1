package receiver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// TestEndToEndMirrorStorm sends snapshots of objects out of order through
// the real receiver, in random permutations, while a worker with the
// built-in mirror handler (and the providers' default specs) processes them
// concurrently, and checks the snapshot each object ends with.
func TestEndToEndMirrorStorm(t *testing.T) {
	t.Parallel()
	const (
		stripeSecret  = "whsec_e2e_mirror"
		shopifySecret = "shpss_e2e_mirror"
		permutations  = 4
		perObject     = 8
	)
	b := setupE2E(t,
		config.SourceConfig{Name: "stripe", Provider: "stripe", Secrets: []config.Secret{stripeSecret}},
		config.SourceConfig{Name: "shop", Provider: "shopify", Secrets: []config.Secret{shopifySecret}})
	startMirror(t, b)

	postStripe := func(eventID, customer string, created int64) {
		body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"customer.updated","created":%d,`+
			`"data":{"object":{"object":"customer","id":%q,"metadata":{"event":%q}}}}`, eventID, created, customer, eventID))
		r := b.post(t, "stripe", stripeDelivery(t, stripeSecret, body), body)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	postShopify := func(eventID string, orderID int, updatedAt string, triggeredAt time.Time) {
		body := []byte(fmt.Sprintf(`{"id":%d,"updated_at":%q,"note":%q}`, orderID, updatedAt, eventID))
		header, err := webhook.Headers(&webhook.Params{Provider: "shopify", Secret: shopifySecret,
			EventID: eventID, EventType: "orders/updated", Time: time.Now(), Body: body})
		require.NoError(t, err)
		header.Set("X-Shopify-Triggered-At", triggeredAt.Format(time.RFC3339Nano))
		r := b.post(t, "shop", header, body)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}

	base := time.Now().Unix()
	type expect struct{ kind, id, eventID string }
	var want []expect
	total := 0
	for p := range permutations {
		// Distinct versions (Stripe's created, one second apart), posted in a
		// random order: the mirror ends at the highest.
		customer := fmt.Sprintf("cus_distinct_%d", p)
		for _, i := range rand.Perm(perObject) {
			postStripe(fmt.Sprintf("evt_d%d_%d", p, i), customer, base+int64(i))
		}
		want = append(want, expect{"customer", customer, fmt.Sprintf("evt_d%d_%d", p, perObject-1)})

		// Tied versions (one second for all): the tie rule's arrival order
		// decides, and each post is committed before the next is sent, so
		// the last one posted wins.
		customer = fmt.Sprintf("cus_tied_%d", p)
		order := rand.Perm(perObject)
		for _, i := range order {
			postStripe(fmt.Sprintf("evt_t%d_%d", p, i), customer, base)
		}
		want = append(want, expect{"customer", customer, fmt.Sprintf("evt_t%d_%d", p, order[perObject-1])})

		// Shopify: one updated_at second for all, X-Shopify-Triggered-At a
		// millisecond apart: the latest trigger wins even when it arrives
		// first, because the provider's event time breaks the tie before
		// arrival does.
		orderID := 1000 + p
		for _, i := range rand.Perm(perObject) {
			postShopify(fmt.Sprintf("shop_%d_%d", p, i), orderID, "2026-12-01T10:00:00-05:00",
				time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Millisecond))
		}
		want = append(want, expect{"orders", fmt.Sprint(orderID), fmt.Sprintf("shop_%d_%d", p, perObject-1)})
		total += 3 * perObject
	}

	waitDone(t, b, total)
	for _, w := range want {
		var eventID string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT event_id FROM hookinbox_snapshot WHERE kind = $1 AND object_id = $2`, w.kind, w.id).Scan(&eventID))
		require.Equal(t, w.eventID, eventID, "%s %s", w.kind, w.id)
	}
	var snapshots int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM hookinbox_snapshot`).Scan(&snapshots))
	require.Equal(t, len(want), snapshots)
}

// startMirror runs a worker whose routes send every event to the mirror
// handler, until the test ends.
func startMirror(t *testing.T, b *e2eBundle) {
	t.Helper()
	w, err := worker.New(b.db.Pool, &worker.Config{
		Queues:         map[string]int{river.QueueDefault: 4},
		ReaperInterval: time.Hour,
		Routes: []worker.Route{
			{Source: "stripe", Types: []string{"customer.*"}, Handlers: []string{"mirror"}},
			{Source: "shop", Types: []string{"*"}, Handlers: []string{"mirror"}},
		},
		Sources: map[string]string{"stripe": river.QueueDefault, "shop": river.QueueDefault},
		Logger:  zaptest.NewLogger(t),
		RiverConfig: func(rc *river.Config) {
			rc.FetchCooldown = 5 * time.Millisecond
			rc.FetchPollInterval = 20 * time.Millisecond
		},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
}

// waitDone polls until n inbox rows are done, failing at once on a failed
// row.
func waitDone(t *testing.T, b *e2eBundle, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var done, failed int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed') FROM webhook_inbox`).Scan(&done, &failed))
		require.Zero(t, failed, "failed rows: %+v", b.rows(t))
		if done == n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d rows done after 60s", done, n)
		<-time.After(10 * time.Millisecond)
	}
}
