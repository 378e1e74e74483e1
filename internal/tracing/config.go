package tracing

import "github.com/hookinbox/hookinbox/pkg/component"

// SampleRatioDefault is Config.SampleRatio's default: every delivery.
const SampleRatioDefault = component.TracingSampleRatioDefault

// Config configures OpenTelemetry tracing and New, declared in
// pkg/component (TracingConfig) so that pkg/config names a public type;
// WithDefaults and Validate are there.
type Config = component.TracingConfig
