package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// TestOutboxMetrics runs the relay against three real HTTP destinations,
// one answering 200, one 500 (failed for good after one attempt), one 410
// (disabled), and reads the counter and the database gauges.
func TestOutboxMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	status := map[string]int{"ok": http.StatusOK, "down": http.StatusInternalServerError, "gone": http.StatusGone}
	destinations := map[string]*relay.DestinationConfig{}
	for name, code := range status {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
		t.Cleanup(srv.Close)
		d, err := relay.NewHTTP(&relay.HTTPConfig{URL: srv.URL, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 5 * time.Second})
		require.NoError(t, err)
		destinations[name] = &relay.DestinationConfig{Destination: d, Concurrency: 1, MaxAttempts: 1, BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond}
	}

	reg := prometheus.NewPedanticRegistry()
	counter := metrics.NewOutbox(reg)
	reg.MustRegister(metrics.NewOutboxBacklog(relay.NewStore(db.Pool), &metrics.OutboxBacklogConfig{
		Cache: time.Nanosecond, Destinations: []string{"down", "gone", "idle", "ok"},
	}))

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	for i := range 3 {
		ev := &inbox.Event{Source: "shop", EventID: fmt.Sprintf("evt_%d", i), EventType: "order.paid"}
		for name := range status {
			_, err := outbox.Enqueue(ctx, tx, ev, outbox.Message{Destination: name, Payload: []byte(`{}`)})
			require.NoError(t, err)
		}
	}
	require.NoError(t, tx.Commit(ctx))

	r, err := relay.New(db.Pool, &relay.Config{PollInterval: 10 * time.Millisecond, Destinations: destinations, Observe: counter.Delivery})
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })

	deliveries := func(destination, outcome string) float64 {
		return seriesValue(t, reg, "hookinbox_outbox_deliveries_total", map[string]string{"destination": destination, "outcome": outcome})
	}
	require.Eventually(t, func() bool {
		return deliveries("ok", relay.OutcomeDelivered) == 3 && deliveries("down", relay.OutcomeFailed) == 3 && deliveries("gone", relay.OutcomeDisabled) == 1
	}, 20*time.Second, 5*time.Millisecond, "every attempt counted by outcome")

	messages := func(destination, status string) float64 {
		return seriesValue(t, reg, "hookinbox_outbox_messages", map[string]string{"destination": destination, "status": status})
	}
	require.Eventually(t, func() bool { return messages("gone", "pending") == 3 }, 20*time.Second, 5*time.Millisecond,
		"a disabled destination's messages wait, pending")
	require.InDelta(t, 3, messages("down", "failed"), 0)
	require.Zero(t, messages("ok", "pending"))
	require.Zero(t, messages("idle", "pending"), "a configured destination without messages reads 0")
	require.InDelta(t, 1, seriesValue(t, reg, "hookinbox_outbox_destination_disabled", map[string]string{"destination": "gone"}), 0)
	require.Zero(t, seriesValue(t, reg, "hookinbox_outbox_destination_disabled", map[string]string{"destination": "ok"}))
	require.Equal(t, 1, testutil.CollectAndCount(reg, "hookinbox_outbox_oldest_pending_age_seconds"), "only gone has pending messages")
}

// seriesValue is the value of name's series with labels, 0 when absent.
func seriesValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
