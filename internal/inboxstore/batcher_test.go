package inboxstore_test

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
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func newBatcher(t *testing.T, db *dbtest.DB, config *inboxstore.BatcherConfig) *inboxstore.Batcher {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	config.Logger = zaptest.NewLogger(t)
	b := inboxstore.NewBatcher(inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}), config)
	t.Cleanup(b.Stop)
	return b
}

// ingestAll runs one Ingest per delivery, all at once, and returns the
// results and errors in delivery order.
func ingestAll(b *inboxstore.Batcher, deliveries []*inboxstore.Delivery) ([]*inboxstore.IngestResult, []error) {
	results := make([]*inboxstore.IngestResult, len(deliveries))
	errs := make([]error, len(deliveries))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, d := range deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			results[i], errs[i] = b.Ingest(ctx, d)
		}()
	}
	close(start)
	wg.Wait()
	return results, errs
}

func distinctXmin(t *testing.T, db *dbtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT xmin::text) FROM webhook_inbox`).Scan(&n))
	return n
}

func TestBatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ConcurrentDeliveriesShareOneTransaction", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		// The group flushes when it holds 8 events, long before MaxWait.
		b := newBatcher(t, db, &inboxstore.BatcherConfig{MaxEvents: 8, MaxWait: time.Minute, Flushers: 1})
		var deliveries []*inboxstore.Delivery
		for i := range 8 {
			deliveries = append(deliveries, delivery(event(fmt.Sprintf("evt_%d", i))))
		}
		results, errs := ingestAll(b, deliveries)
		for i := range deliveries {
			require.NoError(t, errs[i])
			require.Equal(t, 1, results[i].New)
			require.Len(t, results[i].Claimed, 1)
			require.Equal(t, deliveries[i].Events[0].ID, results[i].Claimed[0].EventID)
		}
		require.Equal(t, 1, distinctXmin(t, db), "one commit for the whole group")
		require.Equal(t, 8, countJobs(t, db))
	})

	t.Run("PerDeliveryCountsAreExactUnderContention", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		b := newBatcher(t, db, &inboxstore.BatcherConfig{})
		// 64 deliveries over 16 distinct events, two events each.
		var deliveries []*inboxstore.Delivery
		for i := range 64 {
			deliveries = append(deliveries, delivery(
				event(fmt.Sprintf("evt_%02d", i%16)), event(fmt.Sprintf("evt_%02d", (i+5)%16)),
			))
		}
		results, errs := ingestAll(b, deliveries)
		newBy := map[string]int{}
		total := 0
		for i := range deliveries {
			require.NoError(t, errs[i])
			require.Equal(t, 2, results[i].New+results[i].Duplicates)
			require.Len(t, results[i].Claimed, results[i].New)
			for _, row := range results[i].Claimed {
				newBy[row.EventID]++
			}
			total += results[i].New
		}
		require.Equal(t, 16, total)
		for id, n := range newBy {
			require.Equal(t, 1, n, "%s was new for exactly one delivery", id)
		}
		require.Equal(t, 16, countJobs(t, db))
	})

	t.Run("FailedCommitRefusesEveryDeliveryOfTheGroup", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		// A deferred constraint trigger fails the group at COMMIT.
		_, err := db.Pool.Exec(ctx, `
CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.event_id = 'boom' THEN RAISE EXCEPTION 'commit-time failure'; END IF; RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER boom AFTER INSERT ON webhook_inbox DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION boom();`)
		require.NoError(t, err)
		b := newBatcher(t, db, &inboxstore.BatcherConfig{MaxEvents: 4, MaxWait: time.Minute, Flushers: 1})
		_, errs := ingestAll(b, []*inboxstore.Delivery{delivery(event("a")), delivery(event("b")), delivery(event("boom")), delivery(event("c"))})
		for i, err := range errs {
			require.ErrorContains(t, err, "commit-time failure", "delivery %d", i)
		}
		rows, _ := countRowsAndJobs(t, db)
		require.Zero(t, rows)
	})

	t.Run("BadEventFailsOnlyItsOwnDelivery", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		_, err := db.Pool.Exec(ctx, `ALTER TABLE webhook_inbox ADD CONSTRAINT no_poison CHECK (event_id <> 'poison')`)
		require.NoError(t, err)
		b := newBatcher(t, db, &inboxstore.BatcherConfig{MaxEvents: 4, MaxWait: time.Minute, Flushers: 1})
		results, errs := ingestAll(b, []*inboxstore.Delivery{delivery(event("a")), delivery(event("poison")), delivery(event("b")), delivery(event("c"))})
		require.ErrorContains(t, errs[1], "no_poison")
		for _, i := range []int{0, 2, 3} {
			require.NoError(t, errs[i])
			require.Equal(t, 1, results[i].New)
		}
		rows, jobs := countRowsAndJobs(t, db)
		require.Equal(t, 3, rows)
		require.Equal(t, 3, jobs)
	})

	t.Run("FullQueueIsRefusedAtOnce", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		b := newBatcher(t, db, &inboxstore.BatcherConfig{Flushers: 1, QueueSize: 1})
		// Another transaction holds evt_1: the flusher's claim waits on it.
		blocker, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = blocker.Exec(ctx, `INSERT INTO webhook_inbox (source, provider, event_id) VALUES ('bank', 'x', 'evt_1')`)
		require.NoError(t, err)

		first := make(chan error, 1)
		go func() { _, err := b.Ingest(ctx, delivery(event("evt_1"))); first <- err }()
		// Wait until the flusher's claim is blocked on the lock.
		db.WaitForLockWaiters(t, 1)

		second := make(chan error, 1)
		go func() { _, err := b.Ingest(ctx, delivery(event("evt_2"))); second <- err }()
		require.Eventually(t, func() bool { return b.Queued() == 1 }, 30*time.Second, time.Millisecond)
		// The queue is full: a third delivery is refused at once.
		_, err = b.Ingest(ctx, delivery(event("evt_3")))
		require.ErrorIs(t, err, inboxstore.ErrOverloaded)

		require.NoError(t, blocker.Rollback(ctx))
		require.NoError(t, <-first)
		require.NoError(t, <-second)
	})

	t.Run("AStormingSourceHoldsOnlyItsShareOfTheQueue", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		b := newBatcher(t, db, &inboxstore.BatcherConfig{MaxEvents: 1, Flushers: 1, QueueSize: 4})
		// Another transaction holds evt_1: the flusher's claim waits on it,
		// and what comes next waits in the queue.
		blocker, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = blocker.Exec(ctx, `INSERT INTO webhook_inbox (source, provider, event_id) VALUES ('bank', 'x', 'evt_1')`)
		require.NoError(t, err)
		answers := make(chan error, 4)
		ingest := func(d *inboxstore.Delivery) {
			go func() { _, err := b.Ingest(ctx, d); answers <- err }()
		}
		ingest(delivery(event("evt_1")))
		db.WaitForLockWaiters(t, 1)

		from := func(source, id string) *inboxstore.Delivery {
			d := delivery(event(id))
			d.Source = source
			for i := range d.Events {
				d.Events[i].ID = id
			}
			return d
		}
		// The storm fills its share of the queue, half of it...
		ingest(from("storm", "s1"))
		ingest(from("storm", "s2"))
		require.Eventually(t, func() bool { return b.Queued() == 2 }, 30*time.Second, time.Millisecond)
		// ... and is refused more, though the queue is not full ...
		_, err = b.Ingest(ctx, from("storm", "s3"))
		require.ErrorIs(t, err, inboxstore.ErrSourceShare)
		require.ErrorIs(t, err, inboxstore.ErrOverloaded, "refused the way a full queue is")
		// ... while another source still gets in.
		ingest(from("quiet", "q1"))
		require.Eventually(t, func() bool { return b.Queued() == 3 }, 30*time.Second, time.Millisecond)

		require.NoError(t, blocker.Rollback(ctx))
		for range 4 {
			require.NoError(t, <-answers)
		}
		rows, _ := countRowsAndJobs(t, db)
		require.Equal(t, 4, rows)
	})

	t.Run("ExpiredDeliveryIsNotClaimed", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		b := newBatcher(t, db, &inboxstore.BatcherConfig{})
		expired, cancel := context.WithCancel(ctx)
		cancel()
		_, err := b.Ingest(expired, delivery(event("late")))
		require.ErrorIs(t, err, context.Canceled)
		// A later delivery flushes whatever was queued; late is not in it.
		_, err = b.Ingest(ctx, delivery(event("evt_1")))
		require.NoError(t, err)
		rows, _ := countRowsAndJobs(t, db)
		require.Equal(t, 1, rows)
	})
}

func countRowsAndJobs(t *testing.T, db *dbtest.DB) (rows, jobs int) {
	t.Helper()
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_inbox`).Scan(&rows))
	return rows, countJobs(t, db)
}
