package inbox

import (
	"context"
	"fmt"
	"time"
)

// This file holds statements that benchmarks run on one part of a run's
// rows, selected by event-id prefix (a storm's deliveries, the normal
// traffic beside it). The receiver and the workers never run them.

// PrefixAges is what AgesWithPrefix measures.
type PrefixAges struct {
	// Pending and Done count the rows of the prefix by status.
	Pending, Done int64
	// P50, P99 and Max are percentiles of the done rows' age at done
	// (processed_at - received_at); zero when none is done.
	P50, P99, Max time.Duration
	// LastProcessed is the latest processed_at of the prefix's done rows;
	// zero when none is done.
	LastProcessed time.Time
}

// AgesWithPrefix counts the rows whose event id starts with prefix and
// measures the done ones' age at done.
func (s *Store) AgesWithPrefix(ctx context.Context, prefix string) (*PrefixAges, error) {
	var a PrefixAges
	var p50, p99, maxAge int64 // microseconds
	var last *time.Time
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done'),
       coalesce((1e6 * extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY processed_at - received_at)
                                       FILTER (WHERE status = 'done')))::bigint, 0),
       coalesce((1e6 * extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY processed_at - received_at)
                                       FILTER (WHERE status = 'done')))::bigint, 0),
       coalesce((1e6 * extract(epoch FROM max(processed_at - received_at) FILTER (WHERE status = 'done')))::bigint, 0),
       max(processed_at) FILTER (WHERE status = 'done')
FROM webhook_inbox WHERE starts_with(event_id, $1)`, prefix).Scan(&a.Pending, &a.Done, &p50, &p99, &maxAge, &last)
	if err != nil {
		return nil, fmt.Errorf("inbox: ages of %q: %w", prefix, err)
	}
	a.P50, a.P99, a.Max = time.Duration(p50)*time.Microsecond, time.Duration(p99)*time.Microsecond, time.Duration(maxAge)*time.Microsecond
	if last != nil {
		a.LastProcessed = *last
	}
	return &a, nil
}

// AnyPendingWithPrefix reports whether a pending row's event id starts
// with prefix, through the pending rows' partial index, stopping at the
// first: cheap enough to poll while a backlog drains.
func (s *Store) AnyPendingWithPrefix(ctx context.Context, prefix string) (bool, error) {
	var found bool
	err := s.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM webhook_inbox WHERE status = 'pending' AND starts_with(event_id, $1))`, prefix).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("inbox: any pending of %q: %w", prefix, err)
	}
	return found, nil
}
