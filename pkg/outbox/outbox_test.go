package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// TestMain drops the package's template databases when its tests end.
func TestMain(m *testing.M) {
	dbtest.Main(m)
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	ev := &inbox.Event{Source: "stripe", EventID: "evt_1", EventType: "invoice.paid"}

	t.Run("ReplayedHandlerQueuesNoSecondCopy", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		ctx := context.Background()
		for run, want := range []bool{true, false} {
			tx, err := db.Pool.Begin(ctx)
			require.NoError(t, err)
			queued, err := outbox.Enqueue(ctx, tx, ev, outbox.Message{Destination: "billing", Payload: []byte(`{}`)})
			require.NoError(t, err)
			require.Equal(t, want, queued, "run %d", run)
			queued, err = outbox.Enqueue(ctx, tx, ev, outbox.Message{Destination: "billing", KeySuffix: "line-2", Payload: []byte(`{}`)})
			require.NoError(t, err)
			require.Equal(t, want, queued, "run %d, suffixed", run)
			require.NoError(t, tx.Commit(ctx))
		}
		var keys []string
		rows, err := db.Pool.Query(ctx, `SELECT key FROM hookinbox_outbox ORDER BY key`)
		require.NoError(t, err)
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			keys = append(keys, k)
		}
		require.Equal(t, []string{"stripe:evt_1:billing", "stripe:evt_1:billing:line-2"}, keys)
	})

	t.Run("RolledBackHandlerQueuesNothing", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		ctx := context.Background()
		tx, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = outbox.Enqueue(ctx, tx, ev, outbox.Message{Destination: "billing", Payload: []byte(`{}`)})
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_outbox`).Scan(&n))
		require.Zero(t, n)
	})

	t.Run("MessageWithoutEventNeedsAKey", func(t *testing.T) {
		t.Parallel()
		_, err := outbox.Enqueue(context.Background(), nil, nil, outbox.Message{Destination: "billing"})
		require.ErrorIs(t, err, outbox.ErrNoKey)
	})
}
