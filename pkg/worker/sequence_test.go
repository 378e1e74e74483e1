package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/bulkload"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// sequenced sets up a worker whose "seq" events are sequenced by data.key
// in data.v order, and whose handler logs each run in seqlog.
func (b *testBundle) sequenced(t *testing.T, opt worker.SequenceOption, mutate func(*worker.Config)) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `
CREATE TABLE seqlog (key text NOT NULL, v int NOT NULL, late bool NOT NULL,
                     started timestamptz NOT NULL, ended timestamptz NOT NULL)`)
	require.NoError(t, err)
	reg := b.registry(t)
	reg.Register("seqlog", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		s, ok := worker.SequencedFrom(ctx)
		if !ok {
			return errors.New("not sequenced")
		}
		if ev.EventID == "poison" && b.poisoned.Load() {
			return errors.New("poison")
		}
		if ev.EventID == "doomed" {
			return inbox.Permanent(errors.New("doomed"))
		}
		_, err := tx.Exec(ctx, `
INSERT INTO seqlog SELECT p #>> '{data,key}', (p #>> '{data,v}')::int, $2, clock_timestamp(), clock_timestamp()
FROM (SELECT $1::jsonb AS p) AS ev`, string(ev.Payload), s.Late)
		return err
	})
	opt.Key, opt.Order = "data.key", "data.v"
	b.start(t, func(c *worker.Config) {
		c.Registry = reg
		c.Queues = map[string]int{"default": 8}
		c.Routes = []worker.Route{{Source: "bank", Types: []string{"seq"}, Handlers: []string{"seqlog"}, Sequence: &opt}}
		if mutate != nil {
			mutate(c)
		}
	})
}

func (b *testBundle) ingestSeq(t *testing.T, eventID, key string, v int) int64 {
	t.Helper()
	return b.ingestPayload(t, eventID, "seq", map[string]any{"data": map[string]any{"key": key, "v": v}})
}

type seqRun struct {
	Key  string
	V    int
	Late bool
}

// seqRuns returns the committed runs in the order they ran.
func (b *testBundle) seqRuns(t *testing.T) []seqRun {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT key, v, late FROM seqlog ORDER BY started`)
	require.NoError(t, err)
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[seqRun])
	require.NoError(t, err)
	return runs
}

func (b *testBundle) waitDoneCount(t *testing.T, n int) {
	t.Helper()
	poll(t, 60*time.Second, fmt.Sprintf("%d rows done", n), func() (bool, error) {
		var done int
		err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_inbox WHERE status = 'done'`).Scan(&done)
		return done == n, err
	})
}

func TestSequence(t *testing.T) {
	t.Parallel()

	// A backlog ingested before the worker starts, in shuffled order, runs
	// in version order per key, with no two runs of a key overlapping.
	t.Run("BacklogRunsInVersionOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const keys, perKey = 4, 15
		type ev struct {
			key string
			v   int
		}
		var all []ev
		for k := range keys {
			for v := range perKey {
				all = append(all, ev{fmt.Sprint("k", k), v})
			}
		}
		rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		for _, e := range all {
			b.ingestSeq(t, fmt.Sprintf("%s_%d", e.key, e.v), e.key, e.v)
		}
		b.sequenced(t, worker.SequenceOption{}, nil)
		b.waitDoneCount(t, keys*perKey)

		seen := map[string][]int{}
		for _, r := range b.seqRuns(t) {
			require.False(t, r.Late, "%+v", r)
			seen[r.Key] = append(seen[r.Key], r.V)
		}
		for k, vs := range seen {
			require.Len(t, vs, perKey, k)
			for i, v := range vs {
				require.Equal(t, i, v, "key %s ran %v", k, vs)
			}
		}
		var overlaps int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
SELECT count(*) FROM seqlog a JOIN seqlog b ON a.key = b.key AND a.v < b.v
WHERE tstzrange(a.started, a.ended, '[]') && tstzrange(b.started, b.ended, '[]')`).Scan(&overlaps))
		require.Zero(t, overlaps)
	})

	// Without a hold-back window, an event that arrives after a newer one of
	// its key was processed runs at once and is reported late: in the
	// handler, on its row. It is neither dropped nor reordered silently.
	t.Run("LateArrivalIsProcessedAndReported", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.sequenced(t, worker.SequenceOption{}, nil)
		newer := b.ingestSeq(t, "v2", "k", 2)
		b.waitStatus(t, newer, inbox.StatusDone)
		older := b.ingestSeq(t, "v1", "k", 1)
		r := b.waitStatus(t, older, inbox.StatusDone)
		require.Contains(t, r.Note, `late: sequence key "k" had reached order 2 before this event's 1`)
		require.Equal(t, []seqRun{{"k", 2, false}, {"k", 1, true}}, b.seqRuns(t))
	})

	// With a hold-back window, an older event that arrives within the
	// window of a newer one still runs first.
	t.Run("HoldBackOrdersArrivalsWithinTheWindow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.sequenced(t, worker.SequenceOption{HoldBack: 1500 * time.Millisecond}, nil)
		b.ingestSeq(t, "v2", "k", 2)
		b.ingestSeq(t, "v1", "k", 1)
		b.waitDoneCount(t, 2)
		require.Equal(t, []seqRun{{"k", 1, false}, {"k", 2, false}}, b.seqRuns(t))
	})

	// An event that keeps failing stops holding its key back after
	// PoisonAfter attempts: the next runs while it is still pending, and it
	// is processed, late, once it works.
	t.Run("PoisonStopsHoldingItsKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.poisoned.Store(true)
		poison := b.ingestSeq(t, "poison", "k", 1)
		next := b.ingestSeq(t, "next", "k", 2)
		// The worker's attempts decide (a job's stamp is aligned to them):
		// the poison must outlive the test, so that only PoisonAfter can
		// unblock next.
		b.sequenced(t, worker.SequenceOption{PoisonAfter: 2}, func(c *worker.Config) { c.MaxAttempts = 10000 })
		b.waitStatus(t, next, inbox.StatusDone)
		r := b.row(t, poison)
		require.Equal(t, inbox.StatusPending, r.Status)
		require.GreaterOrEqual(t, r.Attempts, 2)
		b.poisoned.Store(false)
		r = b.waitStatus(t, poison, inbox.StatusDone)
		require.Contains(t, r.Note, "late:")
		require.Equal(t, []seqRun{{"k", 2, false}, {"k", 1, true}}, b.seqRuns(t))
	})

	// The head of a key that fails for good lets the next event run at
	// once: recording the failure wakes it, with no reaper pass.
	t.Run("HeadFailingForGoodWakesTheNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		doomed := b.ingestSeq(t, "doomed", "k", 1)
		next := b.ingestSeq(t, "next", "k", 2)
		b.sequenced(t, worker.SequenceOption{}, func(c *worker.Config) { c.OrphanAfter = time.Hour })
		b.waitStatus(t, doomed, inbox.StatusFailed)
		b.waitStatus(t, next, inbox.StatusDone)
		require.Equal(t, []seqRun{{"k", 2, false}}, b.seqRuns(t))
	})

	// A parked event's job has completed, by design: the reaper does not
	// take it for an orphan. Once the event it waits for is purged (which
	// wakes nothing), the reaper wakes it after orphan_after.
	t.Run("ParkedEventIsNoOrphanAndTheReaperWakesAStalledKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.poisoned.Store(true)
		ctx := context.Background()
		old := inboxstore.NewIngester(b.db.Pool, b.client, &inboxstore.IngesterConfig{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		var ids []int64
		for v, id := range []string{"poison", "next"} {
			payload := fmt.Appendf(nil, `{"data":{"key":"k","v":%d}}`, v+1)
			res, err := old.Ingest(ctx, &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: payload,
				Events: []inboxstore.IncomingEvent{{ID: id, Type: "seq", Payload: payload}}})
			require.NoError(t, err)
			ids = append(ids, res.Claimed[0].ID)
		}
		b.sequenced(t, worker.SequenceOption{PoisonAfter: 0}, func(c *worker.Config) {
			c.MaxAttempts = 100
			c.OrphanAfter, c.ReaperInterval = 2*time.Second, time.Second
			base := c.RiverConfig
			c.RiverConfig = func(rc *river.Config) { base(rc); rc.RetryPolicy = slowRetry{} }
		})
		poll(t, 30*time.Second, "next to park, its job completed", func() (bool, error) {
			var parked bool
			err := b.db.Pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM hookinbox_sequence_park WHERE inbox_id = $1)
   AND (SELECT state FROM river_job WHERE id = $2) = 'completed'`, ids[1], b.row(t, ids[1]).JobID).Scan(&parked)
			return parked && b.row(t, ids[0]).Attempts > 0, err
		})
		err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
			orphans, err := b.store.ListOrphans(ctx, tx, &inboxstore.OrphanQuery{Limit: 10})
			for _, o := range orphans {
				require.NotEqual(t, ids[1], o.ID, "a parked event was taken for an orphan")
			}
			return err
		})
		require.NoError(t, err)
		require.Equal(t, inbox.StatusPending, b.row(t, ids[1]).Status)

		_, err = b.store.Purge(ctx, &inboxstore.Selection{EventIDs: []string{"poison"}})
		require.NoError(t, err)
		b.waitStatus(t, ids[1], inbox.StatusDone)
		require.Equal(t, []seqRun{{"k", 2, false}}, b.seqRuns(t))
	})
}

// slowRetry retries a failed job an hour later: never, within a test.
type slowRetry struct{}

func (slowRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Hour) }

func TestParkedEventsOfARouteThatNoLongerSequences(t *testing.T) {
	t.Parallel()

	// A route change that turns sequencing off (the soak's rollouts, issue
	// 40): events the old routes parked behind their key wait for a run of
	// the key to wake them, and under the new routes no run does. The new
	// worker's reaper wakes every parked event of a source its routes do
	// not sequence at its next pass; they used to wait for orphan_after.
	b := setup(t)
	ctx := context.Background()
	const n = 6
	var ids []int64
	for i := range n {
		ids = append(ids, b.ingestSeq(t, fmt.Sprintf("evt_%d", i), "k", i))
	}
	// As the old routes left them: each parked behind the key, its job
	// completed.
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	for i, id := range ids {
		require.NoError(t, b.store.ParkSequenceTx(ctx, tx, &inboxstore.SequencePosition{
			Source: "bank", Key: "k", Order: fmt.Sprint(i), ReceivedAt: time.Now(), ID: id}))
	}
	_, err = tx.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 'hookinbox.event'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	b.start(t, func(c *worker.Config) {
		c.ReaperInterval = 200 * time.Millisecond
		c.OrphanAfter = time.Hour
		c.Routes = []worker.Route{{Source: "bank", Handlers: []string{"effect"}}}
	})
	b.waitDoneCount(t, n)
	for i := range n {
		require.Equal(t, 1, b.effects(t, fmt.Sprintf("evt_%d", i)))
	}
}

func TestParkedEventsOfARouteThatNoLongerSequencesBesideOneThatDoes(t *testing.T) {
	t.Parallel()

	// Sequencing is a route's option, per source and event type: a route
	// change may turn it off for one type of a source and keep it for
	// another. The events the old "seq" route parked wait for a run of
	// their key, and under the new routes none comes: a "seq" event runs
	// unsequenced and wakes nothing. The reaper's pass must wake all of
	// them, as it does for a source no route sequences; it woke one per
	// key and pass (reaper_interval, 1 minute by default), because
	// another route of the source still sequences.
	b := setup(t)
	ctx := context.Background()
	const n = 6
	var ids []int64
	for i := range n {
		ids = append(ids, b.ingestSeq(t, fmt.Sprintf("evt_%d", i), "k", i))
	}
	// As the old routes left them: each parked behind the key two hours
	// ago, its job completed.
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	for i, id := range ids {
		require.NoError(t, b.store.ParkSequenceTx(ctx, tx, &inboxstore.SequencePosition{
			Source: "bank", Key: "k", Order: fmt.Sprint(i), ReceivedAt: time.Now(), ID: id}))
	}
	_, err = tx.Exec(ctx, `UPDATE hookinbox_sequence_park SET parked_at = now() - interval '2 hours'`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 'hookinbox.event'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	// One reaper pass, at start: its stall window (an hour) is past for
	// every park.
	b.start(t, func(c *worker.Config) {
		c.ReaperInterval = time.Hour
		c.OrphanAfter = time.Hour
		c.Routes = []worker.Route{
			{Source: "bank", Types: []string{"seq"}, Handlers: []string{"effect"}},
			{Source: "bank", Types: []string{"other"}, Handlers: []string{"effect"},
				Sequence: &worker.SequenceOption{Key: "data.key", Order: "data.v"}},
		}
	})
	b.waitReaperRun(t)
	var parked int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_sequence_park`).Scan(&parked))
	require.Zero(t, parked, "events of an unsequenced route left parked after the reaper's pass")
	b.waitDoneCount(t, n)
	for i := range n {
		require.Equal(t, 1, b.effects(t, fmt.Sprintf("evt_%d", i)))
	}
}

func TestAStrandedKeyIsWokenBesideManyThatWait(t *testing.T) {
	t.Parallel()

	// The reaper wakes at most reaperSequenceBatch (100) stalled keys a
	// pass. A key whose head is pending between attempts (River's backoff:
	// hours, at the last of the default ten) stays stalled at every pass
	// once its followers have been parked a reaper pass: its lowest is
	// woken and parks again behind the head, its other followers stay as
	// old as they were. Past a few thousand parks the stalled keys are
	// listed in key order (an index scan), so the same first hundred
	// filled every pass, and a key whose parked event nothing else will
	// wake (its head ran under routes that did not sequence: a rollout)
	// waited, parked, for as long as they waited, here behind 5,000 keys
	// parked half an hour after it.
	b := setup(t)
	ctx := context.Background()
	const waiting = 5000
	first, err := bulkload.ReserveIDs(ctx, b.db.Pool, 3*waiting)
	require.NoError(t, err)
	received := time.Now()
	require.NoError(t, bulkload.Load(ctx, b.db.Pool, 3*waiting, func(i int) (*bulkload.Row, error) {
		payload := fmt.Appendf(nil, `{"data":{"key":"k%05d","v":%d}}`, i/3, i%3)
		return &bulkload.Row{ID: first + int64(i), ReceivedAt: received, Delivery: &inboxstore.Delivery{
			Source: "bank", Provider: "standardwebhooks", Body: payload,
			Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("k%05d_%d", i/3, i%3), Type: "seq", Payload: payload}},
		}}, nil
	}))
	// Each key's head (v 0) pending between attempts, its two followers
	// parked behind it half an hour ago.
	_, err = b.db.Pool.Exec(ctx, `
INSERT INTO hookinbox_sequence_park (inbox_id, source, seq_key, ord, received_at, parked_at)
SELECT $1 + g, 'bank', format('k%s', lpad((g / 3)::text, 5, '0')), g % 3, $2, now() - interval '30 minutes'
FROM generate_series(0, $3 - 1) AS g WHERE g % 3 <> 0`, first, received, 3*waiting)
	require.NoError(t, err)
	// The stranded event, parked an hour ago, its job completed.
	stranded := b.ingestSeq(t, "stranded", "zzz", 1)
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, b.store.ParkSequenceTx(ctx, tx, &inboxstore.SequencePosition{
		Source: "bank", Key: "zzz", Order: "1", ReceivedAt: time.Now(), ID: stranded}))
	_, err = tx.Exec(ctx, `UPDATE hookinbox_sequence_park SET parked_at = now() - interval '1 hour' WHERE inbox_id = $1`, stranded)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 'hookinbox.event'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	// As autovacuum would have by now.
	_, err = b.db.Pool.Exec(ctx, `ANALYZE hookinbox_sequence_park`)
	require.NoError(t, err)

	// Reaper passes every second, each waking a hundred keys.
	b.sequenced(t, worker.SequenceOption{}, func(c *worker.Config) {
		c.ReaperInterval = time.Second
		c.OrphanAfter = 10 * time.Minute
	})
	poll(t, 60*time.Second, "three reaper passes", func() (bool, error) {
		var n int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'hookinbox.reaper' AND state = 'completed'`).Scan(&n)
		return n >= 3, err
	})
	var parked bool
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hookinbox_sequence_park WHERE inbox_id = $1)`, stranded).Scan(&parked))
	require.False(t, parked, "the key stalled longest was not woken by three reaper passes")
	b.waitStatus(t, stranded, inbox.StatusDone)
}
