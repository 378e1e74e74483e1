package worker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookinbox/hookinbox/internal/tracing"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// TestTracingInAGroup works three traced events in one group transaction
// (the gate holds the only flusher while they queue up): each event's
// handler span is the child of its own job's span, linked to its own
// delivery's span, and a failing event's span says so.
func TestTracingInAGroup(t *testing.T) {
	t.Parallel()

	b := setup(t)
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSampler(tracing.Sampler(1)))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	handled := make(chan trace.SpanContext, 8)
	w, entered, release := startGatedWith(t, b, func(c *worker.Config) { c.TracerProvider = tp },
		map[string]worker.Handler{
			"boom": func(context.Context, pgx.Tx, inbox.Event) error { return inbox.Permanent(errors.New("boom")) },
			"span": func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
				select {
				case handled <- trace.SpanContextFromContext(ctx):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		},
		worker.Route{Source: "*", Types: []string{"boom"}, Handlers: []string{"boom"}},
		worker.Route{Source: "*", Types: []string{"account.deposit"}, Handlers: []string{"span", "tx_effect"}})
	b.ingest(t, "evt_gate", "gate")
	await(t, entered, "the held handler to begin")

	// Each delivery is received in a trace of its own.
	receiver := tp.Tracer("receiver")
	const n = 3
	ids := make([]int64, n)
	claims := make([]trace.SpanContext, n)
	for i := range n {
		ctx, span := receiver.Start(context.Background(), "hookinbox.claim", trace.WithNewRoot())
		d := delivery(fmt.Sprintf("evt_%02d", i), "account.deposit")
		if i == 1 {
			d.Events[0].Type = "boom"
		}
		d.TraceContext = tracing.Carrier(ctx)
		res, err := b.ingester.Ingest(ctx, d)
		require.NoError(t, err)
		span.End()
		ids[i], claims[i] = res.Claimed[0].ID, span.SpanContext()
	}
	require.Eventually(t, func() bool { return w.QueuedForGroup() == n }, 30*time.Second, 5*time.Millisecond)
	close(release)
	b.waitStatus(t, ids[0], inbox.StatusDone)
	b.waitStatus(t, ids[1], inbox.StatusFailed)
	b.waitStatus(t, ids[2], inbox.StatusDone)
	var txids int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(DISTINCT txid) FROM tx_effects WHERE event_id IN ('evt_00', 'evt_02')`).Scan(&txids))
	require.Equal(t, 1, txids, "the events were worked in one group")

	var handles, jobs []tracetest.SpanStub
	require.Eventually(t, func() bool {
		handles, jobs = nil, nil
		for _, s := range exporter.GetSpans() {
			switch s.Name {
			case "hookinbox.handle":
				handles = append(handles, s)
			case "river.work":
				jobs = append(jobs, s)
			}
		}
		return len(handles) == n+1 && len(jobs) >= n+1
	}, 30*time.Second, 5*time.Millisecond)

	for i := range n {
		id := fmt.Sprintf("evt_%02d", i)
		var h *tracetest.SpanStub
		for k := range handles {
			for _, kv := range handles[k].Attributes {
				if kv.Key == "hookinbox.event_id" && kv.Value.AsString() == id {
					h = &handles[k]
				}
			}
		}
		require.NotNil(t, h, id)
		require.Len(t, h.Links, 1, id)
		require.Equal(t, claims[i].SpanID(), h.Links[0].SpanContext.SpanID(), "%s links to its own delivery", id)
		require.Equal(t, claims[i].TraceID(), h.Links[0].SpanContext.TraceID(), id)
		parents := 0
		for _, j := range jobs {
			if j.SpanContext.SpanID() == h.Parent.SpanID() && j.SpanContext.TraceID() == h.SpanContext.TraceID() {
				parents++
				require.Len(t, j.Links, 1, id)
				require.Equal(t, claims[i].SpanID(), j.Links[0].SpanContext.SpanID(), "%s: its job's span links to its delivery", id)
			}
		}
		require.Equal(t, 1, parents, "%s: the handler's span is its own job's child", id)
		outcome := ""
		for _, kv := range h.Attributes {
			if kv.Key == "hookinbox.outcome" {
				outcome = kv.Value.AsString()
			}
		}
		if i == 1 {
			require.Equal(t, "failed", outcome, id)
			require.Equal(t, codes.Error, h.Status.Code, id)
			require.Contains(t, h.Status.Description, "boom")
		} else {
			require.Equal(t, "done", outcome, id)
			require.Equal(t, codes.Unset, h.Status.Code, id)
			require.Equal(t, h.SpanContext, <-handled, "%s: the handler runs in its span", id)
		}
	}
}
