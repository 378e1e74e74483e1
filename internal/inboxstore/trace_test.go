package inboxstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// TestJobsCarryTheirDeliverysTraceContext claims three deliveries in one
// group: each job's metadata is the trace context of the delivery that
// brought its event in; of two deliveries of one event, the first's (the
// second is its duplicate); a delivery without one leaves its jobs'
// metadata empty.
func TestJobsCarryTheirDeliverysTraceContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	traceparent := func(span string) map[string]string {
		return map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-" + span + "-01"}
	}
	first := delivery(event("msg_1"), event("msg_2"))
	first.TraceContext = traceparent("00f067aa0ba902b7")
	again := delivery(event("msg_1"))
	again.TraceContext = traceparent("b7ad6b7169203331")
	untraced := delivery(event("msg_3"))
	results, err := b.ingester.IngestGroup(ctx, []*inboxstore.Delivery{first, again, untraced})
	require.NoError(t, err)
	require.Equal(t, 2, results[0].New)
	require.Equal(t, 1, results[1].Duplicates)
	require.Equal(t, 1, results[2].New)

	rows, err := b.db.Pool.Query(ctx, `SELECT args->>'event_id', metadata FROM river_job WHERE kind = $1`, inboxstore.JobKind)
	require.NoError(t, err)
	got := map[string]map[string]string{}
	for rows.Next() {
		var id string
		var metadata []byte
		require.NoError(t, rows.Scan(&id, &metadata))
		var m map[string]string
		require.NoError(t, json.Unmarshal(metadata, &m))
		got[id] = m
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]map[string]string{
		"msg_1": first.TraceContext,
		"msg_2": first.TraceContext,
		"msg_3": {},
	}, got)
}
