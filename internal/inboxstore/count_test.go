package inboxstore_test

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

func TestStoreBulkLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	store := inboxstore.New(db.Pool)
	received := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	const n = 10
	base, err := bulkload.ReserveIDs(ctx, db.Pool, n)
	require.NoError(t, err)
	err = bulkload.Load(ctx, db.Pool, n, func(i int) (*bulkload.Row, error) {
		d := delivery(event(fmt.Sprintf("run1_%02d", i)))
		row := &bulkload.Row{ID: base + int64(i), Delivery: d, ReceivedAt: received}
		switch {
		case i < 4: // done 10 ms to 40 ms after arrival
			row.Status, row.Attempts = inbox.StatusDone, 1
			row.ProcessedAt = received.Add(time.Duration(i+1) * 10 * time.Millisecond)
		case i == 4: // failed on arrival, as the key policy leaves an unparseable delivery
			d.Events[0].Payload = nil
			row.Status, row.LastError = inbox.StatusFailed, "unparseable delivery: not JSON"
		}
		return row, nil
	})
	require.NoError(t, err)

	got, err := store.Get(ctx, db.Pool, base)
	require.NoError(t, err)
	require.Equal(t, "run1_00", got.EventID)
	require.Equal(t, "account.deposit", got.EventType)
	require.JSONEq(t, `{"type":"account.deposit"}`, string(got.Payload))
	require.Equal(t, map[string]string{"Webhook-Id": "run1_00"}, got.Headers)
	require.True(t, received.Equal(got.ReceivedAt))

	// The identity goes on after the reserved ids: a claim does not collide.
	claimed, err := store.Claim(ctx, db.Pool, []*inboxstore.Delivery{delivery(event("other_1"))}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, base+n, claimed[0].ID)

	c, err := store.Count(ctx, &inboxstore.Filter{Source: "bank", EventIDPrefix: "run1_"})
	require.NoError(t, err)
	require.Equal(t, inboxstore.Counts{Pending: 5, Done: 4, Failed: 1}, *c)
	all, err := store.Count(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, inboxstore.Counts{Pending: 6, Done: 4, Failed: 1}, *all)
	none, err := store.Count(ctx, &inboxstore.Filter{Source: "other"})
	require.NoError(t, err)
	require.Equal(t, inboxstore.Counts{}, *none)
	failed, err := store.ListFailed(ctx, &inboxstore.Filter{EventIDPrefix: "run1_"})
	require.NoError(t, err)
	require.Equal(t, []inboxstore.Failure{{EventID: "run1_04", LastError: "unparseable delivery: not JSON"}}, failed)
}

func TestStoreBulkLoadRefusesABatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	err := bulkload.Load(ctx, db.Pool, 1, func(int) (*bulkload.Row, error) {
		return &bulkload.Row{ID: 1, Delivery: delivery(event("a"), event("b")), ReceivedAt: time.Now()}, nil
	})
	require.ErrorContains(t, err, "row 0 has 2 events, not 1")
}
