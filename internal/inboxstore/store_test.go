package inboxstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

type testBundle struct {
	db       *dbtest.DB
	ingester *inboxstore.Ingester
	store    *inboxstore.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	return &testBundle{db: db, ingester: inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}), store: inboxstore.New(db.Pool)}
}

// event returns a well-formed account.deposit event with id.
func event(id string) inboxstore.IncomingEvent {
	return inboxstore.IncomingEvent{ID: id, Type: "account.deposit", Payload: []byte(`{"type":"account.deposit"}`)}
}

// delivery returns a delivery of source bank carrying events.
func delivery(events ...inboxstore.IncomingEvent) *inboxstore.Delivery {
	return &inboxstore.Delivery{
		Source: "bank", Provider: "standardwebhooks", Body: []byte(`{"type":"account.deposit"}`),
		Headers: map[string]string{"Webhook-Id": events[0].ID}, Events: events,
	}
}

func countJobs(t *testing.T, db *dbtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`, inboxstore.JobKind).Scan(&n))
	return n
}

func TestIngest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NewEventIsClaimedWithOneLinkedJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.ingester.Ingest(ctx, delivery(event("msg_1")))
		require.NoError(t, err)
		require.Equal(t, 1, res.New)
		require.Equal(t, 0, res.Duplicates)

		var args inboxstore.JobArgs
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT args FROM river_job WHERE kind = $1`, inboxstore.JobKind).Scan(&args))
		require.Equal(t, res.Claimed[0].ID, args.InboxID)
		info, err := b.store.Lookup(ctx, "bank", "msg_1")
		require.NoError(t, err)
		require.NotNil(t, info.JobID, "the row's job is found through its args")
		require.Equal(t, "available", info.JobState)
	})

	t.Run("DuplicateDeliveryIsNotEnqueuedTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.ingester.Ingest(ctx, delivery(event("msg_1")))
		require.NoError(t, err)
		res, err := b.ingester.Ingest(ctx, delivery(event("msg_1")))
		require.NoError(t, err)
		require.Equal(t, 0, res.New)
		require.Equal(t, 1, res.Duplicates)
		require.Equal(t, 1, countJobs(t, b.db))
	})

	t.Run("DuplicateInsideOneBatchIsSkipped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.ingester.Ingest(ctx, delivery(event("a"), event("b"), event("a")))
		require.NoError(t, err)
		require.Equal(t, 2, res.New)
		require.Equal(t, 1, res.Duplicates)
		require.Equal(t, []string{"a", "b"}, []string{res.Claimed[0].EventID, res.Claimed[1].EventID})
		require.Equal(t, 2, countJobs(t, b.db))
	})

	t.Run("TwinKeyStopsASecondIDAndIsCountedApart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		twin := func(id, key string) inboxstore.IncomingEvent {
			ev := event(id)
			ev.TwinKey = key
			return ev
		}
		res, err := b.ingester.Ingest(ctx, delivery(twin("a", "pi_1"), twin("b", "pi_1"), twin("a", "pi_1"), event("c")))
		require.NoError(t, err)
		require.Equal(t, 2, res.New, "a and c")
		require.Equal(t, 1, res.Duplicates, "the second a, inside the batch")
		require.Equal(t, 1, res.Twins, "b: a new id for the same twin key")

		res, err = b.ingester.Ingest(ctx, delivery(twin("d", "pi_1"), twin("c", "other"), twin("e", "pi_2")))
		require.NoError(t, err)
		require.Equal(t, 1, res.New, "e")
		require.Equal(t, 1, res.Duplicates, "c exists, whatever its twin key")
		require.Equal(t, 1, res.Twins, "d")
		require.Equal(t, 3, countJobs(t, b.db))
	})

	t.Run("DryRunSaysWhatTheClaimDoesAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		twin := func(id, key string) inboxstore.IncomingEvent {
			ev := event(id)
			ev.TwinKey = key
			return ev
		}
		_, err := b.ingester.Ingest(ctx, delivery(twin("a", "pi_1"), event("c")))
		require.NoError(t, err)
		group := func() []*inboxstore.Delivery {
			return []*inboxstore.Delivery{
				delivery(twin("d", "pi_1")),                    // a twin of a
				delivery(event("c")),                           // a duplicate
				delivery(twin("e", "pi_2"), twin("f", "pi_2")), // e new, f its twin in the group
				delivery(event("g"), event("g")),               // g new, then a duplicate in the group
				delivery(event("e")),                           // a duplicate of the group's e
			}
		}
		dry, err := b.ingester.IngestGroupDry(ctx, group())
		require.NoError(t, err)
		require.Equal(t, 2, countJobs(t, b.db), "a dry run enqueues nothing")
		c, err := b.store.Count(ctx, &inboxstore.Filter{Source: "bank"})
		require.NoError(t, err)
		require.Equal(t, int64(2), c.Pending, "and claims nothing")

		claimed, err := b.ingester.IngestGroup(ctx, group())
		require.NoError(t, err)
		require.Len(t, dry, len(claimed))
		for i := range claimed {
			require.Equal(t, claimed[i].ClaimCounts, dry[i].ClaimCounts, "delivery %d", i)
			require.Empty(t, dry[i].Claimed)
		}
		require.Equal(t, []int{0, 0, 1, 1, 0}, []int{claimed[0].New, claimed[1].New, claimed[2].New, claimed[3].New, claimed[4].New})
	})

	t.Run("TwinKeysAreScopedBySource", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, second := event("a"), event("b")
		first.TwinKey, second.TwinKey = "k", "k"
		other := delivery(second)
		other.Source = "other"
		results, err := b.ingester.IngestGroup(ctx, []*inboxstore.Delivery{delivery(first), other})
		require.NoError(t, err)
		require.Equal(t, 1, results[0].New)
		require.Equal(t, 1, results[1].New)
	})

	t.Run("OverlappingClaimsInOppositeOrdersDoNotDeadlock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for round := range 10 {
			var forward, backward []inboxstore.IncomingEvent
			for i := range 30 {
				forward = append(forward, event(fmt.Sprintf("r%d_%02d", round, i)))
				backward = append(backward, event(fmt.Sprintf("r%d_%02d", round, 29-i)))
			}
			results := make(chan *inboxstore.IngestResult, 2)
			errs := make(chan error, 2)
			for _, events := range [][]inboxstore.IncomingEvent{forward, backward} {
				go func() {
					res, err := b.ingester.Ingest(ctx, delivery(events...))
					results <- res
					errs <- err
				}()
			}
			total := 0
			for range 2 {
				require.NoError(t, <-errs)
				total += (<-results).New
			}
			require.Equal(t, 30, total, "round %d", round)
		}
	})

	t.Run("SameEventIDOnAnotherSourceIsNew", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := delivery(event("msg_1"))
		other.Source = "other"
		results, err := b.ingester.IngestGroup(ctx, []*inboxstore.Delivery{delivery(event("msg_1")), other})
		require.NoError(t, err)
		require.Equal(t, 1, results[0].New)
		require.Equal(t, 1, results[1].New)
	})

	t.Run("UnparseableEventIsStoredFailedWithoutJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		d := delivery(inboxstore.IncomingEvent{ID: "sha256:abc", ParseError: errors.New("not JSON")})
		d.Body = []byte("not json")
		res, err := b.ingester.Ingest(ctx, d)
		require.NoError(t, err)
		require.Equal(t, 1, res.New)
		got, err := b.store.Get(ctx, b.db.Pool, res.Claimed[0].ID)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusFailed, got.Status)
		require.Equal(t, "unparseable delivery: not JSON", got.LastError)
		require.Equal(t, []byte("not json"), got.Body)
		require.Nil(t, got.Payload)
		require.Equal(t, 0, countJobs(t, b.db))
	})

	t.Run("PayloadJSONBRefusesIsQuarantinedAndTheRestClaimed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bad := event("bad")
		// Go's decoder accepts an unpaired surrogate escape; jsonb does not.
		bad.Payload = []byte(`{"type":"x","s":"\ud800"}`)
		res, err := b.ingester.Ingest(ctx, delivery(bad, event("good")))
		require.NoError(t, err)
		require.Equal(t, 2, res.New)
		got, err := b.store.Get(ctx, b.db.Pool, res.Claimed[0].ID)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusFailed, got.Status)
		require.Contains(t, got.LastError, "jsonb")
		require.Equal(t, 1, countJobs(t, b.db))
	})

	t.Run("ReceivedAtCanBePinned", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
		require.NoError(t, err)
		pinned := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		in := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{Now: func() time.Time { return pinned }})
		res, err := in.Ingest(ctx, delivery(event("msg_1")))
		require.NoError(t, err)
		got, err := inboxstore.New(db.Pool).Get(ctx, db.Pool, res.Claimed[0].ID)
		require.NoError(t, err)
		require.True(t, pinned.Equal(got.ReceivedAt))
	})

	t.Run("ConcurrentIdenticalDeliveriesMakeOneRowAndOneJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const n = 50
		var wg sync.WaitGroup
		results := make(chan *inboxstore.IngestResult, n)
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := b.ingester.Ingest(ctx, delivery(event("msg_race")))
				if err != nil {
					t.Error(err)
					return
				}
				results <- res
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		newCount, dupCount := 0, 0
		for r := range results {
			newCount += r.New
			dupCount += r.Duplicates
		}
		require.Equal(t, 1, newCount)
		require.Equal(t, n-1, dupCount)
		require.Equal(t, 1, countJobs(t, b.db))
	})
}

func TestCheckConstraint(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(context.Background(),
		`INSERT INTO webhook_inbox (source, provider, event_id, status) VALUES ('s', 'p', 'e', 'weird')`)
	require.ErrorContains(t, err, "webhook_inbox_status_check")
}

// takeOne takes one row (Take of a slice of one), and returns its event as
// it was, or inbox.ErrNotFound when there was nothing to take.
func takeOne(ctx context.Context, store *inboxstore.Store, tx pgx.Tx, id int64) (*inboxstore.Event, error) {
	taken, err := store.Take(ctx, tx, []int64{id}, []int64{0}, time.Time{})
	if err != nil {
		return nil, err
	}
	if taken[id] == nil {
		return nil, inbox.ErrNotFound
	}
	return taken[id].Event, nil
}

func TestStoreTake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("MarksDoneAndReturnsTheRowAsItWas", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.ingester.Ingest(ctx, delivery(event("evt_1")))
		require.NoError(t, err)
		id := res.Claimed[0].ID
		require.NoError(t, b.store.RecordFailure(ctx, b.db.Pool, id, 0, "first try failed", true, time.Time{}))

		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		ev, err := takeOne(ctx, b.store, tx, id)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusFailed, ev.Status, "as it was before the mark: a replay")
		require.Equal(t, 1, ev.Attempts)
		require.Equal(t, "first try failed", ev.LastError)
		require.Equal(t, "evt_1", ev.EventID)
		require.NoError(t, tx.Commit(ctx))

		got, err := b.store.Get(ctx, b.db.Pool, id)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusDone, got.Status)
		require.Equal(t, 2, got.Attempts)
	})

	t.Run("RolledBackTakeLeavesTheRowPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.ingester.Ingest(ctx, delivery(event("evt_1")))
		require.NoError(t, err)
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = takeOne(ctx, b.store, tx, res.Claimed[0].ID)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		got, err := b.store.Get(ctx, b.db.Pool, res.Claimed[0].ID)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusPending, got.Status)
		require.Zero(t, got.Attempts)
	})

	t.Run("SecondTakerWaitsThenFindsNothingToDo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.ingester.Ingest(ctx, delivery(event("evt_1")))
		require.NoError(t, err)
		id := res.Claimed[0].ID
		first, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = takeOne(ctx, b.store, first, id)
		require.NoError(t, err)

		second := make(chan error, 1)
		go func() {
			tx, err := b.db.Pool.Begin(ctx)
			if err != nil {
				second <- err
				return
			}
			defer tx.Rollback(ctx)
			_, err = takeOne(ctx, b.store, tx, id)
			second <- err
		}()
		b.db.WaitForLockWaiters(t, 1)
		require.NoError(t, first.Commit(ctx))
		require.ErrorIs(t, <-second, inbox.ErrNotFound)
	})

	t.Run("ReturnsTheDeliveryKeptBesideTheRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		d := delivery(event("evt_1"), event("evt_1"), event("evt_2"))
		res, err := b.ingester.Ingest(ctx, d)
		require.NoError(t, err)
		require.Len(t, res.Claimed, 2)
		var rows, deliveries int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_inbox), (SELECT count(*) FROM webhook_inbox_delivery AS d
WHERE EXISTS (SELECT 1 FROM webhook_inbox AS i WHERE i.id = d.inbox_id AND i.legacy_body IS NULL))`).Scan(&rows, &deliveries))
		require.Equal(t, [2]int{2, 2}, [2]int{rows, deliveries}, "one delivery per claimed row, none in the row")

		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		ev, err := takeOne(ctx, b.store, tx, res.Claimed[0].ID)
		require.NoError(t, err)
		require.Equal(t, string(d.Body), string(ev.Body))
		require.JSONEq(t, string(d.Events[0].Payload), string(ev.Payload))
		require.Equal(t, "evt_1", ev.Headers["Webhook-Id"])
	})

	t.Run("RowFromBeforeMigration0011KeepsItsBytesInTheRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var id int64
		require.NoError(t, b.db.Pool.QueryRow(ctx, `
INSERT INTO webhook_inbox (source, provider, event_id, legacy_payload, legacy_body, legacy_headers)
VALUES ('bank', 'standardwebhooks', 'old_1', '{"old":true}', 'old bytes', '{"Webhook-Id":"old_1"}') RETURNING id`).Scan(&id))
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		taken, err := b.store.Take(ctx, tx, []int64{id}, []int64{7}, time.Time{})
		require.NoError(t, err)
		require.Contains(t, taken, id)
		ev := taken[id].Event
		require.Equal(t, "old bytes", string(ev.Body))
		require.JSONEq(t, `{"old":true}`, string(ev.Payload))
		require.Equal(t, "old_1", ev.Headers["Webhook-Id"])
		require.NoError(t, tx.Rollback(ctx))

		erased, err := b.store.Purge(ctx, &inboxstore.Selection{Source: "bank", EventIDs: []string{"old_1"}})
		require.NoError(t, err)
		require.Len(t, erased, 1)
		var left int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM webhook_inbox WHERE id = $1 AND num_nonnulls(legacy_payload, legacy_body, legacy_headers) > 0`, id).Scan(&left))
		require.Zero(t, left, "a purge erases the bytes kept in the row")
	})

	t.Run("MissingRowIsNothingToDo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = takeOne(ctx, b.store, tx, 424242)
		require.ErrorIs(t, err, inbox.ErrNotFound)
	})
}

func TestWorkTxOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	for _, tc := range []struct {
		async bool
		want  string
	}{{true, "off"}, {false, "on"}} {
		tx, err := db.Pool.BeginTx(ctx, inboxstore.WorkTxOptions(tc.async))
		require.NoError(t, err)
		var got string
		require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&got))
		require.Equal(t, tc.want, got, "async %v", tc.async)
		require.NoError(t, tx.Commit(ctx))
	}
	// SET LOCAL ends with the transaction.
	var after string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&after))
	require.Equal(t, "on", after)
}

// TestKeyLookupsAreNotCachedAsGenericPlans guards against a plan that
// PostgreSQL would make while the inbox is empty and keep: a sequential scan
// for every later lookup by id or key (see store.go). None of the
// statements that read rows by id or key may be left prepared on the
// connection after many runs.
func TestKeyLookupsAreNotCachedAsGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	conn, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for i := range 8 {
		res, err := b.ingester.Ingest(ctx, delivery(event(fmt.Sprintf("msg_%d", i))))
		require.NoError(t, err)
		id := res.Claimed[0].ID
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = b.store.ExistingEventIDs(ctx, tx, []string{"bank"}, []string{"msg_0"})
		require.NoError(t, err)
		_, err = takeOne(ctx, b.store, tx, id)
		require.NoError(t, err)
		require.NoError(t, b.store.SetNote(ctx, tx, id, "a note"))
		require.NoError(t, b.store.RecordFailure(ctx, tx, id, 0, "x", false, time.Time{}))
		_, err = b.store.ListOrphans(ctx, tx, &inboxstore.OrphanQuery{OrphanAfter: time.Minute, Limit: 10})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	var prepared []string
	rows, err := conn.Query(ctx, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%webhook_inbox%' AND statement NOT LIKE '%pg_prepared_statements%'`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		prepared = append(prepared, s)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, prepared)
}
