package reconcile_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/testkit/providerapi"
)

func TestWorkerWatermark(t *testing.T) {
	t.Parallel()
	start := time.Now().Truncate(time.Second)
	fake := &providerapi.Square{Token: squareToken, Fail: providerapi.Failures{1: http.StatusServiceUnavailable, 2: http.StatusServiceUnavailable}}
	fake.Events = []providerapi.SquareEvent{providerapi.NewSquareEvent(1, start.Add(-10*time.Minute))}
	in, server := setupSquare(t, fake)
	w := &waits{}
	clock := start
	fetcher, err := reconcile.NewSquare(&reconcile.SquareConfig{
		AccessToken: squareToken, BaseURL: server.URL, Parser: in.parser(t, "square"),
		Retry: reconcile.RetryConfig{MaxRetries: 1, Sleep: w.sleep}, Now: func() time.Time { return clock },
	})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	worker := reconcile.NewWorker(in.db.Pool, &reconcile.WorkerConfig{
		Sources: []*reconcile.Source{{Name: "square", Provider: "square", Fetcher: fetcher, Interval: 15 * time.Minute, Lookback: time.Hour, Window: 672 * time.Hour}},
		Logger:  zaptest.NewLogger(t), Metrics: metrics.NewReconcile(reg), Now: func() time.Time { return clock },
	})
	tw := rivertest.NewWorker(t, riverpgxv5.New(in.db.Pool), &river.Config{}, worker)
	work := func() error {
		t.Helper()
		ctx := context.Background()
		tx, err := in.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Commit(ctx)) }()
		res, err := tw.Work(ctx, t, tx, reconcile.Args{Source: "square"}, nil)
		if err != nil {
			return err
		}
		if res.EventKind != river.EventKindJobCompleted {
			return errors.New(res.Job.Errors[len(res.Job.Errors)-1].Error)
		}
		return nil
	}
	watermarks := reconcile.NewWatermarks(in.db.Pool)

	// The API is down past the retries: the run fails, no watermark.
	require.ErrorContains(t, work(), "POST /v2/events answered 503")
	_, ok, err := watermarks.Get(context.Background(), "square")
	require.NoError(t, err)
	require.False(t, ok)

	// It is back: the run lists the last lookback and records its start.
	require.NoError(t, work())
	require.True(t, start.Add(-time.Hour).Equal(fake.Requests[2].Query.Filter.CreatedAt.StartAt))
	mark, ok, err := watermarks.Get(context.Background(), "square")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, start.Equal(mark), "watermark %s, want %s", mark, start)
	require.Equal(t, []string{fake.Events[0].EventID}, in.eventIDs(t, "square"))

	// Down for five hours: the next run lists from the watermark (less
	// the lookback), not from an hour ago.
	clock = start.Add(5 * time.Hour)
	require.NoError(t, work())
	require.True(t, start.Add(-time.Hour).Equal(fake.Requests[3].Query.Filter.CreatedAt.StartAt))
	require.True(t, clock.Equal(fake.Requests[3].Query.Filter.CreatedAt.EndAt))
	mark, _, err = watermarks.Get(context.Background(), "square")
	require.NoError(t, err)
	require.True(t, clock.Equal(mark))

	require.InDelta(t, 1, value(t, reg, "hookinbox_reconcile_runs_total", "result", "failed"), 0)
	require.InDelta(t, 2, value(t, reg, "hookinbox_reconcile_runs_total", "result", "ok"), 0)
	require.InDelta(t, 2, value(t, reg, "hookinbox_reconcile_events_total", "outcome", "fetched"), 0)
	require.InDelta(t, 1, value(t, reg, "hookinbox_reconcile_events_total", "outcome", "new"), 0)
	require.InDelta(t, 1, value(t, reg, "hookinbox_reconcile_events_total", "outcome", "duplicate"), 0)
	require.InDelta(t, float64(clock.Unix()), value(t, reg, "hookinbox_reconcile_watermark_timestamp_seconds", "source", "square"), 0)
}

// TestWorkerWaitsForAManualRun holds the source's lock, as inboxctl
// reconcile does while it runs: the job neither lists nor moves the
// watermark, and is snoozed without spending an attempt.
func TestWorkerWaitsForAManualRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := &providerapi.Square{Token: squareToken, Events: []providerapi.SquareEvent{providerapi.NewSquareEvent(1, time.Now().Add(-time.Minute))}}
	in, server := setupSquare(t, fake)
	fetcher, err := reconcile.NewSquare(&reconcile.SquareConfig{AccessToken: squareToken, BaseURL: server.URL, Parser: in.parser(t, "square")})
	require.NoError(t, err)
	worker := reconcile.NewWorker(in.db.Pool, &reconcile.WorkerConfig{
		Sources: []*reconcile.Source{{Name: "square", Provider: "square", Fetcher: fetcher, Interval: 15 * time.Minute, Lookback: time.Hour}},
		Logger:  zaptest.NewLogger(t),
	})
	manual, err := in.db.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = manual.Rollback(ctx) })
	var got bool
	require.NoError(t, manual.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(x'7265636f'::int, hashtext('square'))`).Scan(&got))
	require.True(t, got)

	tw := rivertest.NewWorker(t, riverpgxv5.New(in.db.Pool), &river.Config{}, worker)
	tx, err := in.db.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	res, err := tw.Work(ctx, t, tx, reconcile.Args{Source: "square"}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobSnoozed, res.EventKind)
	require.Equal(t, 0, res.Job.Attempt, "a snooze spends no attempt")
	require.Empty(t, fake.Requests, "nothing was listed")
	_, ok, err := reconcile.NewWatermarks(in.db.Pool).Get(ctx, "square")
	require.NoError(t, err)
	require.False(t, ok)

	// The manual run over, the job runs.
	require.NoError(t, manual.Rollback(ctx))
	res, err = tw.Work(ctx, t, tx, reconcile.Args{Source: "square"}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	require.Equal(t, []string{fake.Events[0].EventID}, in.eventIDs(t, "square"))
}

// value reads the square source's sample of metric name whose label is
// value.
func value(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}
