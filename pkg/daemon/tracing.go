package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/buildinfo"
	"github.com/hookinbox/hookinbox/internal/tracing"
)

// tracingShutdownTimeout bounds the export of the spans still buffered
// when a daemon stops.
const tracingShutdownTimeout = 5 * time.Second

// serviceName is the OpenTelemetry service.name of the binary env.Name
// names: "hookinbox-receiver", "hookinbox-worker", "hookinbox-ledger".
// OTEL_SERVICE_NAME overrides it.
func serviceName(env *Env) string { return "hookinbox-" + env.Name }

// startTracing sets env.TracerProvider from the config's tracing section,
// unless it is set already: with tracing.enabled, a provider exporting to
// tracing.otlp_endpoint, also made the process's global provider (so that
// handlers' own spans, started with otel.Tracer, join the worker's), with
// export errors logged at warn. With tracing off it does nothing: no
// exporter, no span. Call stop when the daemon has stopped: it exports the
// spans still buffered, for tracingShutdownTimeout at most.
func startTracing(ctx context.Context, env *Env) (stop func(), err error) {
	tc := env.Config.Tracing
	if env.TracerProvider != nil || !tc.Enabled {
		return func() {}, nil
	}
	tc.ServiceName, tc.ServiceVersion = serviceName(env), buildinfo.Version() // the rest as configured
	tp, err := tracing.New(ctx, &tc)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	logger := env.Logger.Named("tracing")
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: spans not exported", zap.Error(err))
	}))
	otel.SetTracerProvider(tp)
	env.TracerProvider = tp
	logger.Info("tracing to OTLP endpoint", zap.Stringer("otlp_endpoint", tc.OTLPEndpoint), zap.Float64("sample_ratio", tc.SampleRatio))
	return func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(shutdownCtx); err != nil {
			logger.Warn("tracing: spans lost at shutdown", zap.Error(err))
		}
	}, nil
}

// insertTracing is River's OpenTelemetry middleware for the receiver's
// insert-only client: a span per bulk insert, inside the group
// transaction's span. It writes no trace context into the jobs: a group
// inserts the jobs of many deliveries, each of which carries its own (see
// package tracing).
func insertTracing(tp trace.TracerProvider) rivertype.Plugin {
	return otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: tp,
		MeterProvider:  metricnoop.NewMeterProvider(),
	})
}
