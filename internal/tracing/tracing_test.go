package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/hookinbox/hookinbox/internal/testkit/tracingtest"
	"github.com/hookinbox/hookinbox/internal/tracing"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNewExportsWithOTLP(t *testing.T) {
	t.Parallel()

	c := tracingtest.NewCollector(t)
	ctx := context.Background()
	tp, err := tracing.New(ctx, &tracing.Config{
		ServiceName: "hookinbox-test", ServiceVersion: "v0.0.0-test",
		OTLPEndpoint: secret.URL(c.URL + "/otlp/v1/traces"), Headers: map[string]secret.String{"authorization": "Bearer test-token"},
	})
	require.NoError(t, err)
	_, span := tp.Tracer("test").Start(ctx, "hookinbox.receive")
	span.End()
	_, child := tp.Tracer("test").Start(trace.ContextWithSpan(ctx, span), "hookinbox.claim")
	child.End()
	require.NoError(t, tp.Shutdown(ctx)) // exports what is buffered

	require.ElementsMatch(t, []string{"hookinbox.receive", "hookinbox.claim"}, c.Spans())
	reqs := c.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "/otlp/v1/traces", reqs[0].Path, "the URL is used as given")
	require.Equal(t, "Bearer test-token", reqs[0].Header.Get("Authorization"))
	require.Equal(t, []string{"hookinbox-test"}, reqs[0].Services)
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	t.Parallel()

	_, err := tracing.New(context.Background(), &tracing.Config{OTLPEndpoint: "http://127.0.0.1:1/v1/traces"})
	require.ErrorContains(t, err, "ServiceName is required")
	_, err = tracing.New(context.Background(), &tracing.Config{ServiceName: "x"})
	require.ErrorContains(t, err, "Endpoint is required")
}

func TestSampler(t *testing.T) {
	t.Parallel()

	exporter := tracetest.NewInMemoryExporter()
	// A ratio that samples (almost) no new trace: what is sampled below
	// is sampled by its parent or its link.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSampler(tracing.Sampler(1e-12)))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	tracer := tp.Tracer("test")
	ctx := context.Background()

	sampledSC := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled,
	})
	droppedSC := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}})

	_, root := tracer.Start(ctx, "root")
	root.End()
	require.False(t, root.SpanContext().IsSampled(), "a new trace at a ratio of 1e-12")

	_, linked := tracer.Start(ctx, "linked-to-sampled", trace.WithLinks(trace.Link{SpanContext: sampledSC}))
	linked.End()
	require.True(t, linked.SpanContext().IsSampled(), "follows its sampled link")

	_, unlinked := tracer.Start(ctx, "linked-to-dropped", trace.WithLinks(trace.Link{SpanContext: droppedSC}))
	unlinked.End()
	require.False(t, unlinked.SpanContext().IsSampled(), "follows its dropped link")

	_, child := tracer.Start(trace.ContextWithSpan(ctx, linked), "child")
	child.End()
	require.True(t, child.SpanContext().IsSampled(), "follows its parent")

	names := []string{}
	for _, s := range exporter.GetSpans() {
		names = append(names, s.Name)
	}
	require.ElementsMatch(t, []string{"linked-to-sampled", "child"}, names)

	all := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSampler(tracing.Sampler(0)))
	t.Cleanup(func() { require.NoError(t, all.Shutdown(context.Background())) })
	_, span := all.Tracer("test").Start(ctx, "root")
	span.End()
	require.True(t, span.SpanContext().IsSampled(), "a ratio of 0 means 1")
}

func TestMetadataCarriesTheTraceContext(t *testing.T) {
	t.Parallel()

	require.Nil(t, tracing.Carrier(context.Background()), "no span, no carrier")
	require.Nil(t, tracing.Metadata(nil))
	_, ok := tracing.LinkFromMetadata(nil)
	require.False(t, ok)
	_, ok = tracing.LinkFromMetadata([]byte(`{"traceparent": 7}`))
	require.False(t, ok)
	_, ok = tracing.LinkFromMetadata([]byte(`not json`))
	require.False(t, ok)

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "hookinbox.receive")
	span.SetAttributes(attribute.String("k", "v"))
	defer span.End()
	metadata := tracing.Metadata(tracing.Carrier(ctx))
	require.JSONEq(t, `{"traceparent": "00-`+span.SpanContext().TraceID().String()+`-`+span.SpanContext().SpanID().String()+`-01"}`, string(metadata))
	link, ok := tracing.LinkFromMetadata(metadata)
	require.True(t, ok)
	require.Equal(t, span.SpanContext().TraceID(), link.SpanContext.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), link.SpanContext.SpanID())
	require.True(t, link.SpanContext.IsSampled())
	require.True(t, link.SpanContext.IsRemote())
}
