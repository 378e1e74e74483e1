package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

// New returns a tracer provider that batches spans and exports them to
// config.OTLPEndpoint. It connects to nothing until the first export. The
// caller must Shutdown the provider, which exports the spans still
// buffered.
func New(ctx context.Context, config *Config) (*sdktrace.TracerProvider, error) {
	if config.ServiceName == "" {
		return nil, errors.New("tracing: ServiceName is required")
	}
	if config.OTLPEndpoint == "" {
		return nil, errors.New("tracing: OTLPEndpoint is required")
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", config.ServiceName), attribute.String("service.version", config.ServiceVersion)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(config.OTLPEndpoint.Reveal())}
	if len(config.Headers) > 0 {
		// Only then: no headers leaves OTEL_EXPORTER_OTLP_HEADERS in force.
		opts = append(opts, otlptracehttp.WithHeaders(revealHeaders(config.Headers)))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(Sampler(config.SampleRatio)),
	), nil
}

// Sampler samples a span whose parent is sampled; a root span with links
// (a job's span, linked to its delivery's) when one of its links is
// sampled; and any other root span (a delivery's, a periodic job's) with
// probability ratio (0 means 1).
func Sampler(ratio float64) sdktrace.Sampler {
	if ratio == 0 {
		ratio = 1
	}
	return sdktrace.ParentBased(linkSampler{ratio: sdktrace.TraceIDRatioBased(ratio)})
}

// linkSampler decides a root span by its links when it has any.
type linkSampler struct {
	ratio sdktrace.Sampler
}

func (s linkSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	linked := false
	for _, l := range p.Links {
		if !l.SpanContext.IsValid() {
			continue
		}
		linked = true
		if l.SpanContext.IsSampled() {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
		}
	}
	if linked {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return s.ratio.ShouldSample(p)
}

func (s linkSampler) Description() string {
	return "FollowLinksElse{" + s.ratio.Description() + "}"
}

// Carrier returns the W3C trace context of ctx's span ("traceparent" and,
// when set, "tracestate"), or nil when ctx has no valid span (tracing is
// off).
func Carrier(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier
}

// Metadata returns carrier as River job metadata (a JSON object), or nil
// for an empty carrier.
func Metadata(carrier map[string]string) []byte {
	if len(carrier) == 0 {
		return nil
	}
	b, _ := json.Marshal(carrier) // A map of strings always encodes.
	return b
}

// LinkFromMetadata returns a link to the span whose trace context a job's
// metadata holds (see Metadata), and false when it holds none.
func LinkFromMetadata(metadata []byte) (trace.Link, bool) {
	if len(metadata) == 0 {
		return trace.Link{}, false
	}
	var fields map[string]any
	if err := json.Unmarshal(metadata, &fields); err != nil {
		return trace.Link{}, false
	}
	carrier := propagation.MapCarrier{}
	for k, v := range fields {
		if s, ok := v.(string); ok {
			carrier[k] = s
		}
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// revealHeaders returns headers' values for the exporter, in a map of its
// own.
func revealHeaders(headers map[string]secret.String) map[string]string {
	out := make(map[string]string, len(headers))
	for name, value := range headers {
		out[name] = value.Reveal()
	}
	return out
}
