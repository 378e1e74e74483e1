package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/bulkload"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// TestBenchSQL runs the benchmark's own statements on loaded rows: four
// done 10 to 40 ms after arrival, one failed, five pending.
func TestBenchSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	pool := db.Pool
	received := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	const n = 10
	base, err := bulkload.ReserveIDs(ctx, pool, n)
	require.NoError(t, err)
	err = bulkload.Load(ctx, pool, n, func(i int) (*bulkload.Row, error) {
		id := fmt.Sprintf("run1_%02d", i)
		row := &bulkload.Row{ID: base + int64(i), ReceivedAt: received, Delivery: &inboxstore.Delivery{
			Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
			Events: []inboxstore.IncomingEvent{{ID: id, Type: "account.deposit", Payload: []byte(`{}`)}},
		}}
		switch {
		case i < 4:
			row.Status, row.Attempts = inbox.StatusDone, 1
			row.ProcessedAt = received.Add(time.Duration(i+1) * 10 * time.Millisecond)
		case i == 4:
			row.Status, row.LastError = inbox.StatusFailed, "unparseable delivery: not JSON"
		}
		return row, nil
	})
	require.NoError(t, err)

	pending, err := anyPending(ctx, pool, "")
	require.NoError(t, err)
	require.True(t, pending)
	pending, err = anyPending(ctx, pool, "run1_")
	require.NoError(t, err)
	require.True(t, pending)
	pending, err = anyPending(ctx, pool, "run2_")
	require.NoError(t, err)
	require.False(t, pending)

	last, err := lastProcessedAt(ctx, pool)
	require.NoError(t, err)
	require.True(t, received.Add(40*time.Millisecond).Equal(last))
	ages, err := doneAges(ctx, pool, received)
	require.NoError(t, err)
	require.Equal(t, Ages{Done: 4, P50: 20 * time.Millisecond, P99: 40 * time.Millisecond, Max: 40 * time.Millisecond, LastProcessed: ages.LastProcessed}, *ages)
	require.True(t, last.Equal(ages.LastProcessed))
	later, err := doneAges(ctx, pool, received.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, Ages{Done: 4}, *later, "no done row was received since")
	prefixed, err := agesWithPrefix(ctx, pool, "run1_")
	require.NoError(t, err)
	want := *ages
	want.Pending = 5
	require.Equal(t, want, *prefixed, "the same done rows, and the pending ones")

	tl, err := tally(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, Tally{Rows: n}, tl)

	require.NoError(t, vacuum(ctx, pool, "webhook_inbox", "river_job"))
	size, err := inboxBytes(ctx, pool)
	require.NoError(t, err)
	require.Positive(t, size)

	// The ledger's tables come with the ledger's migrations; two empty
	// stand-ins do here.
	_, err = pool.Exec(ctx, `CREATE TABLE ledger_entries (id int); CREATE TABLE ledger_accounts (id int)`)
	require.NoError(t, err)
	require.NoError(t, truncateTables(ctx, pool))
	tl, err = tally(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, Tally{}, tl)
	last, err = lastProcessedAt(ctx, pool)
	require.NoError(t, err)
	require.True(t, last.IsZero())
}
