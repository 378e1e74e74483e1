package metrics_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// kedaQuery is the chart's KEDA trigger query, the text the ScaledObject
// carries (tools/helm/chart_test.go checks that it renders this file).
func kedaQuery(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "hookinbox", "files", "keda-backlog.sql"))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// claimableBundle is a database with a backlog of two sources.
type claimableBundle struct {
	db    *dbtest.DB
	store *inboxstore.Store
	ids   map[string][]int64 // by source
}

func setupClaimable(t *testing.T, backlog map[string]int) *claimableBundle {
	t.Helper()
	db := dbtest.New(t)
	b := &claimableBundle{db: db, store: inboxstore.New(db.Pool), ids: map[string][]int64{}}
	for source, n := range backlog {
		for i := range n {
			rows, err := b.store.Claim(context.Background(), db.Pool, []*inboxstore.Delivery{{
				Source: source, Provider: "standardwebhooks", Body: []byte(`{}`),
				Events: []inboxstore.IncomingEvent{{ID: source + "_" + string(rune('a'+i)), Payload: []byte(`{}`)}},
			}}, time.Time{})
			require.NoError(t, err)
			require.Len(t, rows, 1)
			b.ids[source] = append(b.ids[source], rows[0].ID)
		}
	}
	return b
}

func TestKEDAQueryCountsOnlyClaimableWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupClaimable(t, map[string]int{"bank": 5, "shop": 3})
	query := kedaQuery(t)
	value := func() int64 {
		t.Helper()
		var n int64
		require.NoError(t, b.db.Pool.QueryRow(ctx, query).Scan(&n))
		return n
	}

	require.EqualValues(t, 8, value(), "every pending row of an unpaused source is claimable")

	paused, err := b.store.Pause(ctx, "bank", "test", "")
	require.NoError(t, err)
	require.True(t, paused)
	require.EqualValues(t, 3, value(), "pausing bank takes its 5 pending rows out of the trigger's value at once")

	held, err := b.store.Hold(ctx, b.db.Pool, b.ids["bank"][0], "bank")
	require.NoError(t, err)
	require.True(t, held)
	_, err = b.db.Pool.Exec(ctx, `DELETE FROM hookinbox_source_pause WHERE source = 'bank'`)
	require.NoError(t, err)
	require.EqualValues(t, 7, value(), "unpaused, bank's rows count again, except the held one, which waits for Resume to enqueue it")

	_, err = b.db.Pool.Exec(ctx, `INSERT INTO hookinbox_sequence_park (inbox_id, source, seq_key, ord, received_at)
SELECT id, source, 'k', 1, received_at FROM webhook_inbox WHERE id = $1`, b.ids["shop"][0])
	require.NoError(t, err)
	require.EqualValues(t, 6, value(), "a row parked behind its sequence key waits for the key's run, not for a worker")
	backlog, err := b.store.Backlog(ctx)
	require.NoError(t, err)
	for _, row := range backlog {
		if row.Source == "shop" && row.Status == inbox.StatusPending {
			require.EqualValues(t, 2, row.Count, "the backlog gauge leaves the parked row out of the claimable count too")
		}
	}
}

func TestBacklogMetricCountsHeldApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupClaimable(t, map[string]int{"bank": 5, "shop": 3})
	now := time.Now()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewBacklog(b.store, &metrics.BacklogConfig{
		Cache: time.Minute, Sources: []string{"bank", "shop"}, Now: func() time.Time { return now },
	}))
	gauge := func(source, status string) float64 { return backlogGauge(t, reg, source, status) }
	claimable := func() float64 { return gauge("bank", "pending") + gauge("shop", "pending") }

	require.InDelta(t, 8, claimable(), 0)
	require.Zero(t, gauge("bank", "held"), "a configured source without held rows reads 0")
	require.Equal(t, 2, testutil.CollectAndCount(reg, "hookinbox_inbox_oldest_pending_age_seconds"))

	_, err := b.store.Pause(ctx, "bank", "test", "")
	require.NoError(t, err)
	now = now.Add(time.Minute) // past the cache
	require.InDelta(t, 3, claimable(), 0, "the metric falls with the trigger's value")
	require.InDelta(t, 5, gauge("bank", "held"), 0, "bank's rows are held, not lost from view")
	require.Equal(t, 1, testutil.CollectAndCount(reg, "hookinbox_inbox_oldest_pending_age_seconds"),
		"a paused source's rows do not age the backlog (no HookinboxBacklogOld for a deliberate pause)")

	var trigger int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, kedaQuery(t)).Scan(&trigger))
	require.InDelta(t, float64(trigger), claimable(), 0, "the metric's pending is the KEDA trigger's value")
}
