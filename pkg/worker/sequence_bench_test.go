package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// BenchmarkSequencing measures per-object sequencing on a backlog (ingested
// before the worker starts, in shuffled order, as after an outage): one
// key's 1,000 events, and 100 keys' 10,000, drained by one worker of
// concurrency 8 with a no-op handler and the default fetch poll interval
// (1 s). Unsequenced, the same backlog gives the baseline. It reports
// events/s; one iteration is one drain. Issue 26's target: at least 100
// events/s for one key.
//
//	go test -run '^$' -bench Sequencing -benchtime 1x ./pkg/worker/
func BenchmarkSequencing(b *testing.B) {
	for _, c := range []struct{ keys, events int }{{1, 1000}, {100, 10000}} {
		for _, sequenced := range []bool{true, false} {
			b.Run(fmt.Sprintf("keys=%d/events=%d/sequenced=%t", c.keys, c.events, sequenced), func(b *testing.B) {
				var total time.Duration
				for range b.N {
					total += drainBacklog(b, c.keys, c.events, sequenced)
				}
				b.ReportMetric(float64(c.events*b.N)/total.Seconds(), "events/s")
			})
		}
	}
}

// drainBacklog ingests a backlog of events over keys, each key's versions
// shuffled, and returns how long a worker took to process it.
func drainBacklog(b *testing.B, keys, events int, sequenced bool) time.Duration {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	db := dbtest.New(b)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(b, err)
	ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
	const perDelivery = 500
	order := rand.Perm(events)
	for lo := 0; lo < events; lo += perDelivery {
		d := &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`)}
		for _, i := range order[lo:min(lo+perDelivery, events)] {
			payload := fmt.Appendf(nil, `{"data":{"key":"k%d","v":%d}}`, i%keys, i/keys)
			d.Events = append(d.Events, inboxstore.IncomingEvent{ID: fmt.Sprint("e", i), Type: "seq", Payload: payload})
		}
		_, err := ingester.Ingest(ctx, d)
		require.NoError(b, err)
	}
	route := worker.Route{Source: "bank", Types: []string{"seq"}, Handlers: []string{"noop"}}
	if sequenced {
		route.Sequence = &worker.SequenceOption{Key: "data.key", Order: "data.v"}
	}
	w, err := worker.New(db.Pool, &worker.Config{
		Queues: map[string]int{river.QueueDefault: 8}, ReaperInterval: time.Hour,
		Routes: []worker.Route{route}, Sources: sources, Logger: zap.NewNop(),
	})
	require.NoError(b, err)
	b.StartTimer()
	start := time.Now()
	require.NoError(b, w.Start(ctx))
	for {
		var pending bool
		require.NoError(b, db.Pool.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM webhook_inbox WHERE status = 'pending')`).Scan(&pending))
		if !pending {
			break
		}
		<-time.After(5 * time.Millisecond)
	}
	took := time.Since(start)
	b.StopTimer()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(b, w.Stop(stopCtx))
	return took
}
