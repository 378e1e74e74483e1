package inboxstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

func TestPurgedRowIsNeverRevived(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("HoldLeavesAPurgedRowFailedAndResumeEnqueuesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.ingester.Ingest(ctx, delivery(event("evt_1")))
		require.NoError(t, err)
		id := res.Claimed[0].ID
		erased, err := b.store.Purge(ctx, &inboxstore.Selection{Source: "bank", EventIDs: []string{"evt_1"}})
		require.NoError(t, err)
		require.Len(t, erased, 1)
		_, err = b.store.Pause(ctx, "bank", "test", "")
		require.NoError(t, err)

		// The purged row's job runs while its source is paused.
		held, err := b.store.Hold(ctx, b.db.Pool, id, "bank")
		require.NoError(t, err)
		require.False(t, held, "an erased row is not held")
		got, err := b.store.Get(ctx, b.db.Pool, id)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusFailed, got.Status)

		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{})
		require.NoError(t, err)
		jobsBefore := countJobs(t, b.db)
		n, err := b.store.Resume(ctx, &inboxstore.ResumeParams{Source: "bank", Client: client, QueueFor: func(string) string { return river.QueueDefault }})
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, jobsBefore, countJobs(t, b.db), "no job for a purged row")
		got, err = b.store.Get(ctx, b.db.Pool, id)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusFailed, got.Status)
	})

	t.Run("PurgeOfAHeldRowIsNotResumed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.ingester.Ingest(ctx, delivery(event("evt_1")))
		require.NoError(t, err)
		id := res.Claimed[0].ID
		_, err = b.store.Pause(ctx, "bank", "test", "")
		require.NoError(t, err)
		held, err := b.store.Hold(ctx, b.db.Pool, id, "bank")
		require.NoError(t, err)
		require.True(t, held)
		_, err = b.store.Purge(ctx, &inboxstore.Selection{Source: "bank", EventIDs: []string{"evt_1"}})
		require.NoError(t, err)

		client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{})
		require.NoError(t, err)
		n, err := b.store.Resume(ctx, &inboxstore.ResumeParams{Source: "bank", Client: client, QueueFor: func(string) string { return river.QueueDefault }})
		require.NoError(t, err)
		require.Zero(t, n)
		got, err := b.store.Get(ctx, b.db.Pool, id)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusFailed, got.Status)
	})
}

func TestDoneClearsLastError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// failedOnce returns the id of a row whose first run failed.
	failedOnce := func(t *testing.T, b *testBundle) int64 {
		t.Helper()
		res, err := b.ingester.Ingest(ctx, delivery(event("evt_1")))
		require.NoError(t, err)
		id := res.Claimed[0].ID
		require.NoError(t, b.store.RecordFailure(ctx, b.db.Pool, id, 0, "first try failed", true, time.Time{}))
		return id
	}
	requireDoneWithHistory := func(t *testing.T, b *testBundle) {
		t.Helper()
		info, err := b.store.Lookup(ctx, "bank", "evt_1")
		require.NoError(t, err)
		require.Equal(t, inbox.StatusDone, info.Status)
		require.Empty(t, info.LastError, "a done row has no last error")
		require.Len(t, info.AttemptErrors, 1, "its history keeps the failed attempt")
		require.Equal(t, "first try failed", info.AttemptErrors[0].Error)
	}

	t.Run("TakeOfOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := failedOnce(t, b)
		require.NoError(t, pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
			ev, err := takeOne(ctx, b.store, tx, id)
			require.NoError(t, err)
			require.Equal(t, "first try failed", ev.LastError, "the event as it was")
			return nil
		}))
		requireDoneWithHistory(t, b)
	})

	t.Run("Take", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := failedOnce(t, b)
		require.NoError(t, pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
			taken, err := b.store.Take(ctx, tx, []int64{id}, []int64{1}, time.Time{})
			require.NoError(t, err)
			require.Equal(t, "first try failed", taken[id].Event.LastError)
			return nil
		}))
		requireDoneWithHistory(t, b)
	})

	t.Run("UndoneTakeKeepsTheError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := failedOnce(t, b)
		require.NoError(t, pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
			taken, err := b.store.Take(ctx, tx, []int64{id}, []int64{1}, time.Time{})
			require.NoError(t, err)
			return b.store.UndoTakes(ctx, tx, []*inboxstore.Taken{taken[id]}, nil, time.Time{})
		}))
		got, err := b.store.Get(ctx, b.db.Pool, id)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusFailed, got.Status)
		require.Equal(t, "first try failed", got.LastError)
	})
}
