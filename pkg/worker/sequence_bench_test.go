package worker_test

import (
	"context"
	"fmt"
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

// BenchmarkSequencing measures what per-object sequencing costs: a backlog
// of 500 events over 20 keys (ingested before the worker starts, as after
// an outage) is drained by one worker of concurrency 8 with a no-op
// handler, unsequenced and sequenced by key. It reports events/s; one
// iteration is one drain.
//
//	go test -run '^$' -bench Sequencing -benchtime 3x ./pkg/worker/
func BenchmarkSequencing(b *testing.B) {
	const events, keys = 500, 20
	for _, sequenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("sequenced=%t", sequenced), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				db := dbtest.New(b)
				client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
				require.NoError(b, err)
				ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
				for i := range events {
					payload := fmt.Appendf(nil, `{"data":{"key":"k%d","v":%d}}`, i%keys, i/keys)
					_, err := ingester.Ingest(context.Background(), &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks",
						Body: payload, Events: []inboxstore.IncomingEvent{{ID: fmt.Sprint("e", i), Type: "seq", Payload: payload}}})
					require.NoError(b, err)
				}
				route := worker.Route{Source: "bank", Types: []string{"seq"}, Handlers: []string{"noop"}}
				if sequenced {
					route.Sequence = &worker.SequenceOption{Key: "data.key", Order: "data.v"}
				}
				w, err := worker.New(db.Pool, &worker.Config{
					Queues: map[string]int{river.QueueDefault: 8}, ReaperInterval: time.Hour,
					Routes: []worker.Route{route}, Sources: sources, Logger: zap.NewNop(),
					RiverConfig: func(rc *river.Config) {
						rc.FetchCooldown = 5 * time.Millisecond
						rc.FetchPollInterval = 20 * time.Millisecond
					},
				})
				require.NoError(b, err)
				b.StartTimer()
				start := time.Now()
				require.NoError(b, w.Start(context.Background()))
				for {
					var done int
					require.NoError(b, db.Pool.QueryRow(context.Background(),
						`SELECT count(*) FROM webhook_inbox WHERE status = 'done'`).Scan(&done))
					if done == events {
						break
					}
					<-time.After(5 * time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				require.NoError(b, w.Stop(ctx))
				cancel()
			}
			b.ReportMetric(float64(events*b.N)/total.Seconds(), "events/s")
		})
	}
}
