package worker

import (
	"context"
	"errors"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/tracing"
)

// tracerName names the tracer of the worker's spans.
const tracerName = "github.com/hookinbox/hookinbox/pkg/worker"

// handleSpan is the span of one run of an event's handlers: the child of
// its job's span (River's "river.work"), linked, like that span, to the
// span of the delivery that enqueued the job. Handlers get it in their
// context, so that their own spans are its children.
const handleSpan = "hookinbox.handle"

// The attributes of the worker's spans. None holds a payload or a secret.
const (
	attrSource    = attribute.Key("hookinbox.source")
	attrEventID   = attribute.Key("hookinbox.event_id")
	attrEventType = attribute.Key("hookinbox.event_type")
	attrInboxID   = attribute.Key("hookinbox.inbox_id")
	attrRequestID = attribute.Key("hookinbox.request_id")
	attrJobID     = attribute.Key("river.job_id")
	attrAttempt   = attribute.Key("river.attempt")
	attrOutcome   = attribute.Key("hookinbox.outcome")
)

// The values of hookinbox.outcome on a handle span.
const (
	// handleDone: the handlers ran and their transaction committed.
	handleDone = "done"
	// handleSkipped: the row was done already, or gone; nothing ran.
	handleSkipped = "skipped"
	// handleFailed: the handlers failed (the row records it; River retries
	// or the event failed for good).
	handleFailed = "failed"
	// handleSnoozed: a gate (a lock, a sequence) deferred the event.
	handleSnoozed = "snoozed"
	// handleParked: a sequenced event waits for its key's earlier events;
	// its job ended, and it is enqueued again when they have run.
	handleParked = "parked"
	// handleDeferred: a lock held elsewhere ended its group; the event is
	// worked again alone, in a span of its own.
	handleDeferred = "deferred"
	// handleRolledBack: its group's transaction failed as a whole; the
	// event is worked again alone.
	handleRolledBack = "rolled_back"
)

// jobTracing is River's OpenTelemetry middleware: a span per job worked,
// linked to the trace context in the job's metadata (the delivery's, see
// package tracing). Its metrics are not kept: the worker has its own.
func jobTracing(tp trace.TracerProvider) rivertype.Plugin {
	return otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider:         tp,
		MeterProvider:          metricnoop.NewMeterProvider(),
		EnableTracePropagation: true,
	})
}

// startHandle starts the handle span of job's event in ctx, as the child of
// the span in parent (the job's context, holding River's span).
func (w *eventWorker) startHandle(ctx, parent context.Context, job *river.Job[inboxstore.JobArgs]) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attrSource.String(job.Args.Source), attrEventID.String(job.Args.EventID), attrEventType.String(job.Args.EventType),
		attrInboxID.Int64(job.Args.InboxID), attrRequestID.String(job.Args.RequestID),
		attrJobID.Int64(job.ID), attrAttempt.Int(job.Attempt),
	)}
	if link, ok := tracing.LinkFromMetadata(job.Metadata); ok {
		opts = append(opts, trace.WithLinks(link))
	}
	return w.tracer.Start(trace.ContextWithSpan(ctx, trace.SpanFromContext(parent)), handleSpan, opts...)
}

// processOutcome is the outcome of an event worked in a transaction of its
// own.
func processOutcome(err error, skipped bool) string {
	switch {
	case err == nil && skipped:
		return handleSkipped
	case errors.Is(err, errParked):
		return handleParked
	case err == nil:
		return handleDone
	case isSnooze(err):
		return handleSnoozed
	default:
		return handleFailed
	}
}

// endHandle ends a handle span with its outcome and, for a failure, err.
// Of a PostgreSQL error only the SQLSTATE is kept: its message may quote
// the data.
func endHandle(span trace.Span, outcome string, err error) {
	span.SetAttributes(attrOutcome.String(outcome))
	if err != nil && outcome != handleSnoozed && outcome != handleParked {
		msg := err.Error()
		if code := inboxstore.SQLState(err); code != "" {
			msg = "PostgreSQL error SQLSTATE " + code
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// groupSpans are the handle spans of a group's events, by index; nil when
// tracing is off.
type groupSpans []struct {
	span trace.Span
	err  error
}

// record keeps the handlers' error of event i.
func (g groupSpans) record(i int, err error) {
	if g != nil {
		g[i].err = err
	}
}

// end ends the spans once the group's transaction has ended with txErr.
func (g groupSpans) end(txErr error) {
	for _, s := range g {
		if s.span == nil {
			continue
		}
		switch {
		case txErr != nil:
			endHandle(s.span, handleRolledBack, txErr)
		case s.err == nil:
			endHandle(s.span, handleDone, nil)
		case inboxstore.ClassifyPg(s.err).Contended():
			endHandle(s.span, handleDeferred, nil)
		default:
			endHandle(s.span, handleFailed, s.err)
		}
	}
}
