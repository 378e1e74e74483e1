package retention_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/retention"
	"github.com/hookinbox/hookinbox/internal/testkit/bulkload"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

type testBundle struct {
	db    *dbtest.DB
	store *inboxstore.Store
	now   time.Time
}

func setup(t *testing.T) *testBundle { return setupTB(t) }

func setupTB(t testing.TB) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	// Rows are loaded relative to the database's clock, which retention
	// compares them with.
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now))
	return &testBundle{db: db, store: inboxstore.New(db.Pool), now: now}
}

// load writes n rows of source, events <prefix>0 …, received age ago.
func (b *testBundle) load(t *testing.T, source, prefix string, n int, status inbox.Status, age time.Duration) {
	b.loadTB(t, source, prefix, n, status, age)
}

func (b *testBundle) loadTB(t testing.TB, source, prefix string, n int, status inbox.Status, age time.Duration) {
	t.Helper()
	ctx := context.Background()
	first, err := bulkload.ReserveIDs(ctx, b.db.Pool, n)
	require.NoError(t, err)
	at := b.now.Add(-age)
	require.NoError(t, bulkload.Load(ctx, b.db.Pool, n, func(i int) (*bulkload.Row, error) {
		return &bulkload.Row{
			ID: first + int64(i), Status: status, ReceivedAt: at, ProcessedAt: at,
			Delivery: &inboxstore.Delivery{
				Source: source, Provider: "standardwebhooks", Body: []byte(`{"email":"a@example.com"}`),
				Headers: map[string]string{"Webhook-Id": "x"},
				Events:  []inboxstore.IncomingEvent{{ID: fmt.Sprintf("%s%d", prefix, i), Type: "account.deposit", Payload: []byte(`{"email":"a@example.com"}`)}},
			},
		}, nil
	}))
}

func (b *testBundle) count(t *testing.T, where string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_inbox LEFT JOIN webhook_inbox_delivery ON inbox_id = id WHERE `+where, args...).Scan(&n))
	return n
}

// strayDeliveries counts the deliveries whose row is gone.
func (b *testBundle) strayDeliveries(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
SELECT count(*) FROM webhook_inbox_delivery AS d WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox AS i WHERE i.id = d.inbox_id)`).Scan(&n))
	return n
}

const day = 24 * time.Hour

func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("KeepsFailedAndRecentRowsAndNeverBlocksTheReceiver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.load(t, "bank", "old_", 5000, inbox.StatusDone, 40*day)
		b.load(t, "bank", "dead_", 100, inbox.StatusFailed, 40*day)
		b.load(t, "bank", "stuck_", 10, inbox.StatusPending, 40*day)
		b.load(t, "bank", "new_", 100, inbox.StatusDone, day)
		b.load(t, "other", "old_", 50, inbox.StatusDone, 40*day)
		pruner := retention.NewPruner(b.store, &retention.Config{
			Policies: []retention.Policy{{Source: "bank", Retention: 30 * day}},
			Batch:    100, Now: func() time.Time { return b.now }, Logger: zaptest.NewLogger(t),
		})
		dry, err := pruner.DryRun(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 5000, dry[0].Deleted)
		require.EqualValues(t, 5000, b.count(t, `event_id LIKE 'old_%' AND source = 'bank'`), "a dry run deletes nothing")

		// The receiver claims events (some of them duplicates of rows being
		// pruned) while the pass runs; a sampler records every lock the
		// pass's statements hold on the table.
		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{})
		require.NoError(t, err)
		ingester := inboxstore.NewIngester(b.db.Pool, client, &inboxstore.IngesterConfig{})
		done := make(chan struct{})
		var wg sync.WaitGroup
		var slowest time.Duration
		var claims int
		var strong []string
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				_, err := ingester.Ingest(ctx, &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
					Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("live_%d", i), Type: "t", Payload: []byte(`{}`)}}})
				if err != nil {
					t.Errorf("claim during prune: %v", err)
					return
				}
				slowest, claims = max(slowest, time.Since(start)), claims+1
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				rows, err := b.db.Pool.Query(ctx, `SELECT l.mode FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.relation = 'webhook_inbox'::regclass AND a.query LIKE '%WITH doomed AS%'
  AND l.mode NOT IN ('AccessShareLock', 'RowShareLock', 'RowExclusiveLock')`)
				if err != nil {
					t.Errorf("sample locks: %v", err)
					return
				}
				for rows.Next() {
					var mode string
					_ = rows.Scan(&mode)
					strong = append(strong, mode)
				}
				rows.Close()
			}
		}()
		res, err := pruner.Run(ctx)
		close(done)
		wg.Wait()
		require.NoError(t, err)
		require.EqualValues(t, 5000, res[0].Deleted)
		require.GreaterOrEqual(t, res[0].Batches, 50, "small batches")
		require.Empty(t, strong, "the prune took a table lock that blocks the receiver's INSERT")
		t.Logf("%d claims during the prune, the slowest %s", claims, slowest)

		require.Zero(t, b.count(t, `event_id LIKE 'old_%' AND source = 'bank'`))
		require.EqualValues(t, 100, b.count(t, `event_id LIKE 'dead_%' AND status = 'failed'`), "dead letters are never pruned")
		require.EqualValues(t, 10, b.count(t, `event_id LIKE 'stuck_%'`), "pending rows are never pruned")
		require.EqualValues(t, 100, b.count(t, `event_id LIKE 'new_%'`), "rows inside retention stay")
		require.EqualValues(t, 50, b.count(t, `source = 'other'`), "a source without a policy is left alone")
		require.Zero(t, b.strayDeliveries(t), "a pruned row's delivery goes with it")
	})

	t.Run("PayloadRetentionErasesDataAndKeepsKeys", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.load(t, "bank", "week_", 30, inbox.StatusDone, 8*day)
		b.load(t, "bank", "dead_", 5, inbox.StatusFailed, 8*day)
		b.load(t, "bank", "new_", 20, inbox.StatusDone, day)
		pruner := retention.NewPruner(b.store, &retention.Config{
			Policies: []retention.Policy{{Source: "bank", Retention: 30 * day, PayloadRetention: 7 * day}},
			Batch:    7, Now: func() time.Time { return b.now },
		})
		res, err := pruner.Run(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 30, res[0].Erased)
		require.EqualValues(t, 30, b.count(t, `erased_at IS NOT NULL AND body IS NULL AND payload IS NULL AND headers IS NULL`))
		require.EqualValues(t, 55, b.count(t, `true`), "rows and keys stay")
		require.Zero(t, b.count(t, `erased_at IS NOT NULL AND event_id NOT LIKE 'week_%'`))
		require.EqualValues(t, 25, b.count(t, `inbox_id IS NOT NULL`), "only the erased rows lost their delivery")
	})
}

func TestPruneUsesTheDatabasesClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.load(t, "bank", "young_", 20, inbox.StatusDone, 29*day)
	b.load(t, "bank", "old_", 10, inbox.StatusDone, 31*day)
	b.load(t, "bank", "week_", 5, inbox.StatusDone, 6*day)
	// The worker's clock runs two days ahead of the database's.
	skewed := func() time.Time { return time.Now().Add(2 * day) }
	pruner := retention.NewPruner(b.store, &retention.Config{
		Policies: []retention.Policy{{Source: "bank", Retention: 30 * day, PayloadRetention: 7 * day}},
		Now:      skewed,
	})
	dry, err := pruner.DryRun(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, dry[0].Deleted)
	require.EqualValues(t, 20, dry[0].Erased)
	res, err := pruner.Run(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, res[0].Deleted, "only rows older than the retention by the database's clock")
	require.EqualValues(t, 20, b.count(t, `event_id LIKE 'young_%'`), "a row inside retention is kept, whatever the worker's clock")
	require.EqualValues(t, 20, b.count(t, `erased_at IS NOT NULL`), "payloads past payload_retention are erased")
	require.Zero(t, b.count(t, `event_id LIKE 'week_%' AND erased_at IS NOT NULL`), "a payload inside payload_retention is kept")
}

func TestPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ErasesExactlyTheSelectedRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.load(t, "bank", "d_", 10, inbox.StatusDone, day)
		b.load(t, "bank", "f_", 10, inbox.StatusFailed, day)
		b.load(t, "bank", "p_", 10, inbox.StatusPending, day)
		b.load(t, "shop", "d_", 10, inbox.StatusDone, day)

		_, err := b.store.Purge(ctx, &inboxstore.Selection{Statuses: []inbox.Status{inbox.StatusFailed}})
		require.ErrorIs(t, err, inboxstore.ErrEmptySelection)

		sel := &inboxstore.Selection{Source: "bank", EventIDs: []string{"d_1", "f_2", "p_3", "nope"}}
		n, err := b.store.CountSelected(ctx, sel)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
		erased, err := b.store.Purge(ctx, sel)
		require.NoError(t, err)
		require.Len(t, erased, 3)
		got := map[string]inbox.Status{}
		for _, r := range erased {
			require.Equal(t, "bank", r.Source)
			got[r.EventID] = r.Status
		}
		require.Equal(t, map[string]inbox.Status{"d_1": inbox.StatusDone, "f_2": inbox.StatusFailed, "p_3": inbox.StatusPending}, got)
		require.EqualValues(t, 3, b.count(t, `erased_at IS NOT NULL`))
		require.EqualValues(t, 3, b.count(t, `erased_at IS NOT NULL AND body IS NULL AND payload IS NULL AND headers IS NULL
  AND attempt_errors = '[]' AND source = 'bank' AND event_id IN ('d_1', 'f_2', 'p_3')`))
		require.EqualValues(t, 40, b.count(t, `true`), "keys stay")
		require.EqualValues(t, 37, b.count(t, `body IS NOT NULL AND payload IS NOT NULL`), "nothing else is touched")
		require.EqualValues(t, 1, b.count(t, `event_id = 'p_3' AND status = 'failed'`), "a purged pending row is never run")

		again, err := b.store.Purge(ctx, sel)
		require.NoError(t, err)
		require.Empty(t, again, "erased rows are not erased twice")
	})
}

// TestPruneRefusesToUndoTheDedupWindow checks that a Pruner, however its
// policies were built, deletes nothing while one of them is shorter than
// its provider's redelivery window (issue 38).
func TestPruneRefusesToUndoTheDedupWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.load(t, "bank", "old_", 10, inbox.StatusDone, 2*time.Hour)
	for _, tt := range []struct {
		name   string
		policy retention.Policy
		refuse bool
	}{
		{"InsideStripesWindow", retention.Policy{Source: "bank", Provider: "stripe", Retention: time.Hour}, true},
		{"InsideTwiliosWindow", retention.Policy{Source: "bank", Provider: "twilio", Retention: 23 * time.Hour}, true},
		{"AtTheWindow", retention.Policy{Source: "bank", Provider: "twilio", Retention: day}, false},
		{"UnknownWindow", retention.Policy{Source: "bank", Provider: "hmac", Retention: time.Hour}, false},
	} {
		err := tt.policy.Check()
		if !tt.refuse {
			require.NoError(t, err, tt.name)
			continue
		}
		require.ErrorIs(t, err, retention.ErrInsideRedeliveryWindow, tt.name)
		// One safe policy before it: the pass changes nothing at all.
		pruner := retention.NewPruner(b.store, &retention.Config{Policies: []retention.Policy{
			{Source: "shop", Provider: "stripe", Retention: 30 * day}, tt.policy,
		}})
		for _, run := range []func(context.Context) ([]retention.SourceResult, error){pruner.DryRun, pruner.Run} {
			res, err := run(ctx)
			require.ErrorIs(t, err, retention.ErrInsideRedeliveryWindow, tt.name)
			require.Contains(t, err.Error(), "source bank: ", tt.name)
			require.Empty(t, res, tt.name)
		}
		require.EqualValues(t, 10, b.count(t, `true`), "%s: nothing deleted", tt.name)
	}
}
