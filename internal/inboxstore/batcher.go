package inboxstore

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/groupcommit"
	"github.com/hookinbox/hookinbox/pkg/component"
)

// ErrOverloaded is returned by Batcher.Ingest when its queue is full: the
// database is not keeping up, and the delivery should be refused at once
// (503 with Retry-After) rather than left to time out.
var ErrOverloaded = errors.New("inbox: ingest queue is full")

// ErrSourceShare is Batcher.Ingest's error when the delivery's source holds
// its share of the queue (BatcherConfig.SourceShare) while the queue is not
// full: the source is storming, and the room left is for the others. It
// wraps ErrOverloaded; the delivery should be refused the same way.
var ErrSourceShare = fmt.Errorf("%w: the source holds its share of it", ErrOverloaded)

// The defaults NewBatcher applies to a zero BatcherConfig field,
// pkg/component's.
const (
	// BatchMaxEventsDefault is BatcherConfig.MaxEvents's default.
	BatchMaxEventsDefault = component.BatchMaxEventsDefault
	// BatchFlushersDefault is BatcherConfig.Flushers's default.
	BatchFlushersDefault = component.BatchFlushersDefault
	// BatchQueueSizeDefault is BatcherConfig.QueueSize's default.
	BatchQueueSizeDefault = component.BatchQueueSizeDefault
)

// BatcherConfig configures a Batcher, declared in pkg/component so that
// pkg/config names a public type; WithDefaults and Validate are there.
type BatcherConfig = component.BatcherConfig

// Batcher coalesces concurrent deliveries into group transactions: one
// claim statement, one bulk enqueue and one commit for many deliveries. Each
// caller is answered only after the commit that holds its events, and
// learns exactly which of its events were new. Memory is bounded by
// QueueSize deliveries. It is internal/groupcommit's engine with a flush
// that claims.
type Batcher struct {
	ingester *Ingester
	config   BatcherConfig
	// tracer is nil when tracing is off: no span, no cost.
	tracer trace.Tracer
	engine *groupcommit.Committer[[]newEvent, *IngestResult]
}

// groupRequest is one delivery's events (after the key policy) in a group.
type groupRequest = groupcommit.Request[[]newEvent]

// NewBatcher returns a started Batcher claiming through ingester. Stop it
// with Stop.
func NewBatcher(ingester *Ingester, config *BatcherConfig) *Batcher {
	c := *config.WithDefaults()
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	b := &Batcher{ingester: ingester, config: c}
	if c.TracerProvider != nil {
		b.tracer = c.TracerProvider.Tracer(tracerName)
	}
	b.engine = groupcommit.New(b.flush, &groupcommit.Config[[]newEvent]{
		MaxSize: c.MaxEvents, Size: func(events []newEvent) int { return len(events) },
		Linger: c.MaxWait, Flushers: c.Flushers, QueueSize: c.QueueSize,
		Key: deliverySource, Share: c.SourceShare,
	})
	b.engine.Start()
	return b
}

// Ingest applies the inbox's key policy to the delivery's events (see
// Delivery), queues them for the next group transaction and waits for its
// commit. It returns ErrOverloaded at once when the queue is full, and
// ctx's error when ctx ends first; in both cases the caller must not
// acknowledge (the events may or may not be committed later, which a
// provider's retry then finds as a duplicate).
func (b *Batcher) Ingest(ctx context.Context, delivery *Delivery) (*IngestResult, error) {
	res, err := b.engine.Do(ctx, delivery.events())
	switch {
	case errors.Is(err, groupcommit.ErrShare):
		return nil, ErrSourceShare
	case errors.Is(err, groupcommit.ErrOverloaded):
		return nil, ErrOverloaded
	case errors.Is(err, groupcommit.ErrStopped):
		return nil, errBatcherStopped
	}
	return res, err
}

// deliverySource is a delivery's source, the key of its share of the
// queue: every event of a delivery has its source.
func deliverySource(events []newEvent) string {
	if len(events) == 0 {
		return ""
	}
	return events[0].Source
}

// errBatcherStopped answers the deliveries still queued at Stop.
var errBatcherStopped = errors.New("inbox: batcher stopped")

// Queued returns the number of deliveries waiting for a flusher.
func (b *Batcher) Queued() int { return b.engine.Waiting() }

// Stop lets the flushers finish the group in hand and answers every
// delivery still queued with an error. Deliveries must no longer be
// submitted (the HTTP server has shut down first).
func (b *Batcher) Stop() { b.engine.Stop() }

// flush commits a group, one result per delivery, through the one claim
// (Ingester.claim), whatever the group's size. A group of several that
// fails because of its data (PgData: a constraint, a value jsonb refuses
// that quarantine did not catch) is claimed again one delivery at a time,
// so that one bad event fails only its own delivery; a group that fails for
// any other reason (the database is down, the deadline passed, COMMIT
// failed) fails every delivery in it. ctx has the earliest of the
// deliveries' deadlines; a lone delivery's claim runs in its own context.
func (b *Batcher) flush(ctx context.Context, group []groupRequest) ([]groupcommit.Result[*IngestResult], error) {
	n := 0
	events := make([][]newEvent, len(group))
	for i, r := range group {
		n += len(r.Item)
		events[i] = r.Item
	}
	if b.config.ObserveGroup != nil {
		b.config.ObserveGroup(n)
	}
	if len(group) == 1 {
		ctx = group[0].Ctx
	}
	ctx, span := b.startCommit(ctx, group, n)
	claimed, err := b.ingester.claim(ctx, events, false)
	endSpan(span, err)
	results := make([]groupcommit.Result[*IngestResult], len(group))
	switch {
	case err == nil:
		for i, res := range claimed {
			results[i].Value = res
		}
		return results, nil
	case len(group) == 1:
		results[0].Err = err
		return results, nil
	case ClassifyPg(err) != PgData:
		b.config.Logger.Warn("group commit failed; every delivery in it is refused", zap.Int("deliveries", len(group)), zap.Error(err))
		return nil, err
	}
	b.config.Logger.Info("group commit refused by its data; retrying its deliveries one by one", zap.Int("deliveries", len(group)), zap.Error(err))
	for i, r := range group {
		res, err := b.ingester.claim(r.Ctx, [][]newEvent{r.Item}, false)
		results[i].Err = err
		if err == nil {
			results[i].Value = res[0]
		}
	}
	return results, nil
}

// tracerName names the tracer of the inbox's spans.
const tracerName = "github.com/hookinbox/hookinbox/pkg/inbox"

// commitSpan is the span of a group transaction.
const commitSpan = "hookinbox.commit"

// startCommit starts the span of a group transaction of n events, or
// returns a nil span when tracing is off. A lone delivery's is the child of
// its span; a group belongs to none of its deliveries, so its span is
// linked to each of theirs instead.
func (b *Batcher) startCommit(ctx context.Context, live []groupRequest, n int) (context.Context, trace.Span) {
	if b.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attribute.Int("hookinbox.deliveries", len(live)), attribute.Int("hookinbox.events", n))}
	if len(live) > 1 {
		links := make([]trace.Link, 0, len(live))
		for _, p := range live {
			if sc := trace.SpanContextFromContext(p.Ctx); sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
		opts = append(opts, trace.WithLinks(links...))
	}
	return b.tracer.Start(ctx, commitSpan, opts...)
}

// endSpan ends span, with err as its status. Of a PostgreSQL error only
// the SQLSTATE is kept: its message may quote the data (a payload that
// jsonb refused), which a trace must not carry.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		msg := err.Error()
		if code := SQLState(err); code != "" {
			msg = "inbox: PostgreSQL error SQLSTATE " + code
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}
