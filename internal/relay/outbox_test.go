package relay_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func TestRelay(t *testing.T) {
	t.Parallel()

	t.Run("DeliversSignedMessagesOnce", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		s := newSink(t)
		startRelay(t, db, &relay.Config{Destinations: map[string]*relay.DestinationConfig{
			"billing": {Destination: s.destination(t)},
		}})
		keys := enqueue(t, db, "billing", 0, 50)
		waitFor(t, "all delivered", func() bool { return statusCounts(t, db)["delivered"] == 50 })
		got, requests := s.counts(t)
		require.Len(t, got, 50)
		require.Equal(t, 50, requests)
		for _, k := range keys {
			require.Equal(t, 1, got[k], k)
		}
	})

	t.Run("TwoRelaysNeverClaimTwice", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		s := newSink(t)
		enqueue(t, db, "billing", 0, 300)
		for range 2 {
			startRelay(t, db, &relay.Config{Batch: 10, Destinations: map[string]*relay.DestinationConfig{
				"billing": {Destination: s.destination(t), Concurrency: 4},
			}})
		}
		waitFor(t, "all delivered", func() bool { return statusCounts(t, db)["delivered"] == 300 })
		got, requests := s.counts(t)
		require.Len(t, got, 300)
		require.Equal(t, 300, requests, "a message was claimed twice")
	})

	t.Run("OutageThenRecoveryBacksOff", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		s := newSink(t)
		s.status = func(n int, _ *http.Request) (int, http.Header) {
			if n <= 4 {
				return http.StatusServiceUnavailable, nil
			}
			return http.StatusOK, nil
		}
		startRelay(t, db, &relay.Config{PollInterval: 10 * time.Millisecond, Destinations: map[string]*relay.DestinationConfig{
			"billing": {Destination: s.destination(t), Concurrency: 1, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond},
		}})
		enqueue(t, db, "billing", 0, 3)
		waitFor(t, "all delivered", func() bool { return statusCounts(t, db)["delivered"] == 3 })
		got, requests := s.counts(t)
		require.Len(t, got, 3)
		require.Equal(t, 7, requests, "4 failures, then 3 deliveries")
		var failures int
		var lastError *string
		require.NoError(t, db.Pool.QueryRow(context.Background(), `
SELECT count(*) FILTER (WHERE e->>'error' LIKE '%503%'), max(last_error) FROM hookinbox_outbox, jsonb_array_elements(history) e`).
			Scan(&failures, &lastError))
		require.Equal(t, 4, failures, "every failed attempt is in the history")
		require.Nil(t, lastError, "a delivered message keeps no last error")
		// Each retry waited: the destination paused after each failure.
		var spread time.Duration
		require.NoError(t, db.Pool.QueryRow(context.Background(), `
SELECT max(delivered_at) - min(created_at) FROM hookinbox_outbox`).Scan(&spread))
		require.GreaterOrEqual(t, spread, 4*10*time.Millisecond, "the retries did not back off")
	})

	t.Run("RetryAfterIsHonoured", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		s := newSink(t)
		s.status = func(int, *http.Request) (int, http.Header) {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}}
		}
		startRelay(t, db, &relay.Config{Destinations: map[string]*relay.DestinationConfig{
			"billing": {Destination: s.destination(t)},
		}})
		enqueue(t, db, "billing", 0, 1)
		var wait time.Duration
		waitFor(t, "a failed attempt", func() bool {
			err := db.Pool.QueryRow(context.Background(), `
SELECT next_attempt_at - now() FROM hookinbox_outbox WHERE last_error IS NOT NULL`).Scan(&wait)
			return err == nil
		})
		require.Greater(t, wait, 110*time.Second)
		require.LessOrEqual(t, wait, 120*time.Second)
	})

	t.Run("GoneDisablesTheDestinationUntilEnabled", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		ctx := context.Background()
		s := newSink(t)
		gone := true
		s.status = func(int, *http.Request) (int, http.Header) {
			if gone {
				return http.StatusGone, nil
			}
			return http.StatusOK, nil
		}
		startRelay(t, db, &relay.Config{PollInterval: 10 * time.Millisecond, Destinations: map[string]*relay.DestinationConfig{
			"billing": {Destination: s.destination(t), Concurrency: 1},
		}})
		enqueue(t, db, "billing", 0, 5)
		store := relay.NewStore(db.Pool)
		waitFor(t, "disabled", func() bool {
			d, err := store.Disabled(ctx)
			require.NoError(t, err)
			return len(d) == 1 && d[0].Name == "billing"
		})
		// The disabled destination's messages wait, pending, uncounted.
		waitFor(t, "released", func() bool {
			var leased int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_outbox WHERE attempts > 0`).Scan(&leased))
			return leased == 0
		})
		require.Equal(t, map[string]int{"pending": 5}, statusCounts(t, db))
		_, requests := s.counts(t)
		require.Equal(t, 1, requests, "a disabled destination gets no more requests")

		s.mu.Lock()
		gone = false
		s.mu.Unlock()
		require.NoError(t, store.Enable(ctx, "billing"))
		require.ErrorIs(t, store.Enable(ctx, "billing"), relay.ErrNotDisabled)
		waitFor(t, "all delivered", func() bool { return statusCounts(t, db)["delivered"] == 5 })
	})

	t.Run("ExhaustedMessagesFailAndReplay", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		ctx := context.Background()
		s := newSink(t)
		down := true
		s.status = func(int, *http.Request) (int, http.Header) {
			if down {
				return http.StatusInternalServerError, nil
			}
			return http.StatusOK, nil
		}
		startRelay(t, db, &relay.Config{PollInterval: 10 * time.Millisecond, Destinations: map[string]*relay.DestinationConfig{
			"billing": {Destination: s.destination(t), MaxAttempts: 2, BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond},
		}})
		keys := enqueue(t, db, "billing", 0, 2)
		waitFor(t, "failed", func() bool { return statusCounts(t, db)["failed"] == 2 })
		store := relay.NewStore(db.Pool)
		failed, err := store.List(ctx, &relay.ListParams{})
		require.NoError(t, err)
		require.Len(t, failed, 2)
		require.Equal(t, 2, failed[0].Attempts)
		require.Contains(t, failed[0].LastError, "500")

		s.mu.Lock()
		down = false
		s.mu.Unlock()
		n, err := store.Replay(ctx, &relay.ReplayParams{Keys: keys[:1]})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		waitFor(t, "replayed one delivered", func() bool { return statusCounts(t, db)["delivered"] == 1 })
		require.Equal(t, 1, statusCounts(t, db)["failed"])
	})
}
