package receiver

import (
	"context"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/tracing"
)

// tracerName names the tracer of the receiver's spans.
const tracerName = "github.com/hookinbox/hookinbox/internal/receiver"

// The receiver's spans. A request to a configured source has a span
// "hookinbox.receive" (a new trace: a traceparent the unauthenticated
// client sends is ignored); a verified delivery's claim, from its queueing
// for a group transaction to the commit, is its child "hookinbox.claim",
// whose trace context the delivery's jobs carry to the worker.
const (
	receiveSpan = "hookinbox.receive"
	claimSpan   = "hookinbox.claim"
)

// The attributes of the receiver's spans. None holds a secret, a header or
// a body.
const (
	attrSource     = attribute.Key("hookinbox.source")
	attrProvider   = attribute.Key("hookinbox.provider")
	attrRequestID  = attribute.Key("hookinbox.request_id")
	attrOutcome    = attribute.Key("hookinbox.outcome")
	attrReason     = attribute.Key("hookinbox.reason")
	attrNew        = attribute.Key("hookinbox.events.new")
	attrDuplicates = attribute.Key("hookinbox.events.duplicates")
	attrTwins      = attribute.Key("hookinbox.events.twins")
	attrStatusCode = attribute.Key("http.response.status_code")
)

// The values of hookinbox.outcome beyond the metrics' own (rejected,
// handshake): a stored delivery is "new" when it claimed an event, else
// "duplicate".
const (
	outcomeNew       = "new"
	outcomeDuplicate = "duplicate"
)

// traceRequest starts the request's span, puts it in the request's
// context, and returns the function that ends it.
func (s *Server) traceRequest(c echo.Context, src *Source) (end func()) {
	r := c.Request()
	ctx, span := s.tracer.Start(r.Context(), receiveSpan,
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrSource.String(src.Name), attrProvider.String(src.Provider),
			attribute.String("http.request.method", r.Method), attribute.String("http.route", "/webhooks/:source"),
			attrRequestID.String(c.Response().Header().Get(echo.HeaderXRequestID))))
	c.SetRequest(r.WithContext(ctx))
	return func() { span.End() }
}

// claim claims the delivery, in a span of its own when the request is
// traced; the delivery's jobs carry that span's trace context, sampled or
// not, so that the worker follows the receiver's sampling decision.
func (s *Server) claim(ctx context.Context, d *inboxstore.Delivery) (*inboxstore.IngestResult, error) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return s.ingester.Ingest(ctx, d)
	}
	ctx, span := s.tracer.Start(ctx, claimSpan, trace.WithAttributes(attribute.Int("hookinbox.events", len(d.Events))))
	defer span.End()
	d.TraceContext = tracing.Carrier(ctx)
	res, err := s.ingester.Ingest(ctx, d)
	if err != nil {
		span.SetStatus(codes.Error, "not committed")
	}
	return res, err
}

// traceOutcome records a delivery's outcome and answer on its span.
func traceOutcome(c echo.Context, outcome string, status int) {
	span := trace.SpanFromContext(c.Request().Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrStatusCode.Int(status))
	if outcome != metrics.OutcomeAccepted {
		span.SetAttributes(attrOutcome.String(outcome))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, outcome)
	}
}

// traceReason records why a delivery was refused on its span.
func traceReason(c echo.Context, reason string) {
	if span := trace.SpanFromContext(c.Request().Context()); span.IsRecording() {
		span.SetAttributes(attrReason.String(reason))
	}
}

// traceCounts records what a stored delivery's claim did on its span.
func traceCounts(c echo.Context, res *inboxstore.IngestResult) {
	span := trace.SpanFromContext(c.Request().Context())
	if !span.IsRecording() {
		return
	}
	outcome := outcomeDuplicate
	if res.New > 0 {
		outcome = outcomeNew
	}
	span.SetAttributes(attrOutcome.String(outcome),
		attrNew.Int(res.New), attrDuplicates.Int(res.Duplicates), attrTwins.Int(res.Twins))
}
