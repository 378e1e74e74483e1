package retention_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/retention"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// BenchmarkPrune measures one retention pass over a table of
// HOOKINBOX_PRUNE_ROWS rows (default 200,000; the figure is
// 2,000,000): 80% done and past retention, 5% failed and as old, 15% done
// and recent. A receiver claims events one at a time throughout; the
// benchmark reports the pass's rate and the claims' latency.
func BenchmarkPrune(b *testing.B) {
	n := 200_000
	if s := os.Getenv("HOOKINBOX_PRUNE_ROWS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	ctx := context.Background()
	for range b.N {
		tb := &testBundle{now: time.Now()}
		b.StopTimer()
		bundle := setupTB(b)
		tb.db, tb.store = bundle.db, bundle.store
		start := time.Now()
		old, dead := n*80/100, n*5/100
		tb.loadTB(b, "bank", "old_", old, inbox.StatusDone, 40*day)
		tb.loadTB(b, "bank", "dead_", dead, inbox.StatusFailed, 40*day)
		tb.loadTB(b, "bank", "new_", n-old-dead, inbox.StatusDone, day)
		_, err := tb.db.Pool.Exec(ctx, `VACUUM ANALYZE webhook_inbox`)
		require.NoError(b, err)
		b.Logf("loaded %d rows in %s", n, time.Since(start).Round(time.Millisecond))

		client, err := river.NewClient(riverpgxv5.New(tb.db.Pool), &river.Config{})
		require.NoError(b, err)
		ingester := inboxstore.NewIngester(tb.db.Pool, client, &inboxstore.IngesterConfig{})
		done := make(chan struct{})
		latencies := make(chan []time.Duration, 1)
		go func() {
			var ls []time.Duration
			for i := 0; ; i++ {
				select {
				case <-done:
					latencies <- ls
					return
				default:
				}
				s := time.Now()
				_, err := ingester.Ingest(ctx, &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
					Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("live_%d", i), Type: "t", Payload: []byte(`{}`)}}})
				if err != nil {
					b.Error(err)
				}
				ls = append(ls, time.Since(s))
			}
		}()
		pruner := retention.NewPruner(tb.store, &retention.Config{Policies: []retention.Policy{{Source: "bank", Retention: 30 * day}}})
		b.StartTimer()
		s := time.Now()
		res, err := pruner.Run(ctx)
		elapsed := time.Since(s)
		b.StopTimer()
		close(done)
		ls := <-latencies
		require.NoError(b, err)
		require.EqualValues(b, old, res[0].Deleted)
		slices.Sort(ls)
		b.Logf("pruned %d of %d rows in %s (%d batches, %.0f rows/s, %s per batch); %d claims meanwhile: p50 %s p99 %s max %s",
			res[0].Deleted, n, elapsed.Round(time.Millisecond), res[0].Batches, float64(res[0].Deleted)/elapsed.Seconds(),
			(elapsed / time.Duration(res[0].Batches)).Round(time.Microsecond), len(ls),
			ls[len(ls)/2].Round(time.Microsecond), ls[len(ls)*99/100].Round(time.Microsecond), ls[len(ls)-1].Round(time.Microsecond))
	}
}
