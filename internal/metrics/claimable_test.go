package metrics_test

import (
	"context"
	"fmt"
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

// kedaValue is the chart's KEDA trigger's value on b's database.
func (b *claimableBundle) kedaValue(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), kedaQuery(t)).Scan(&n))
	return n
}

func TestKEDAQueryCountsOnlyClaimableWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupClaimable(t, map[string]int{"bank": 5, "shop": 3})
	value := func() int64 { return b.kedaValue(t) }

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
	require.EqualValues(t, 6+1, value(), "a row parked behind its sequence key is not claimable, but its key counts once "+
		"(TestKEDAQueryCountsParkedKeysAWorkerMustWake)")
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

	require.InDelta(t, float64(b.kedaValue(t)), claimable(), 0, "the metric's pending is the KEDA trigger's value")
}

// TestKEDAQueryCountsParkedKeysAWorkerMustWake is issue 38's suspected point
// on KEDA. An event of a sequence key that is not next parks, and the key's
// next run wakes it; but when the event ahead of it stops being pending
// without a run (purged, or discarded by River and failed by the reaper),
// nothing wakes the key but the reaper's stalled pass, which runs in a
// worker. A trigger that counted no parked row read 0 then, and with
// minReplicaCount 0 KEDA scaled the workers to zero, leaving the key to
// wait for new traffic. The trigger counts each such key once: a key runs
// one event at a time, so its parked events are one worker's work.
func TestKEDAQueryCountsParkedKeysAWorkerMustWake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupClaimable(t, map[string]int{"bank": 6, "shop": 2})
	value := func() int64 { return b.kedaValue(t) }
	park := func(source, key string, ids ...int64) {
		t.Helper()
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		for i, id := range ids {
			require.NoError(t, b.store.ParkSequenceTx(ctx, tx, &inboxstore.SequencePosition{
				Source: source, Key: key, Order: fmt.Sprint(i + 2), ReceivedAt: time.Now(), ID: id,
			}))
		}
		require.NoError(t, tx.Commit(ctx))
	}

	// bank's key acct_1: its head runs, three events parked behind it.
	bank := b.ids["bank"]
	park("bank", "acct_1", bank[1], bank[2], bank[3])
	require.EqualValues(t, 1+2+2+1, value(), "bank's head, bank's 2 unsequenced events and shop's 2; acct_1 once")

	// The head is purged before it runs (inboxctl events purge): it is
	// failed, and no run of acct_1 will wake the parked events.
	_, err := b.store.Purge(ctx, &inboxstore.Selection{Source: "bank", EventIDs: []string{"bank_a"}})
	require.NoError(t, err)
	stalled, err := b.store.ListStalledSequences(ctx, b.db.Pool, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []inboxstore.SequenceKey{{Source: "bank", Key: "acct_1"}}, stalled, "only the reaper, in a worker, wakes acct_1")
	require.EqualValues(t, 2+2+1, value(), "acct_1 still needs a worker")

	// The unsequenced events are done: what is left needs a worker all the
	// same.
	for _, id := range []int64{bank[4], bank[5], b.ids["shop"][0], b.ids["shop"][1]} {
		_, err := b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET status = 'done', processed_at = now() WHERE id = $1`, id)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, value(), "acct_1's three parked events: one key, one unit of work")

	// A second key; a parked marker whose row is no longer pending counts
	// for nothing.
	park("shop", "cart_9", b.ids["shop"][0])
	park("shop", "cart_7", b.ids["shop"][1])
	_, err = b.db.Pool.Exec(ctx, `UPDATE webhook_inbox SET status = 'pending', processed_at = NULL WHERE id = $1`, b.ids["shop"][1])
	require.NoError(t, err)
	require.EqualValues(t, 2, value(), "acct_1 and cart_7; cart_9's event is done")

	// A paused source's keys wait for the resume, not for a worker (the
	// reaper does not wake them either).
	_, err = b.store.Pause(ctx, "bank", "test", "")
	require.NoError(t, err)
	require.EqualValues(t, 1, value(), "bank is paused: cart_7 alone")
}
