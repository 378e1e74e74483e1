package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func TestBacklog(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	store := inboxstore.New(db.Pool)
	claim := func(eventID string) {
		t.Helper()
		_, err := store.Claim(ctx, db.Pool, []*inboxstore.Delivery{{
			Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
			Events: []inboxstore.IncomingEvent{{ID: eventID, Payload: []byte(`{}`)}},
		}}, time.Time{})
		require.NoError(t, err)
	}
	now := time.Now()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewBacklog(store, &metrics.BacklogConfig{
		Cache: time.Minute, Sources: []string{"bank", "shop"}, Now: func() time.Time { return now },
	}))
	pending := func(source string) float64 { return backlogGauge(t, reg, source, "pending") }

	claim("ev_1")
	require.InDelta(t, 1, pending("bank"), 0)
	require.Zero(t, pending("shop"), "a configured source without rows reads 0")
	require.Equal(t, 1, testutil.CollectAndCount(reg, "hookinbox_inbox_oldest_pending_age_seconds"))

	claim("ev_2")
	now = now.Add(59 * time.Second)
	require.InDelta(t, 1, pending("bank"), 0, "within the cache, the database is not read again")
	now = now.Add(time.Second)
	require.InDelta(t, 2, pending("bank"), 0, "past it, it is")
}

// backlogGauge reads hookinbox_inbox_backlog_events{source, status} from
// reg, failing the test when the series is missing.
func backlogGauge(t *testing.T, reg *prometheus.Registry, source, status string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "hookinbox_inbox_backlog_events" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == source && labels["status"] == status {
				return m.GetGauge().GetValue()
			}
		}
	}
	require.Failf(t, "no backlog series", "source %s, status %s", source, status)
	return 0
}
