package component

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

// TracingSampleRatioDefault is TracingConfig.SampleRatio's default: every
// delivery.
const TracingSampleRatioDefault = 1.0

// TracingConfig configures OpenTelemetry tracing in the receiver and the
// worker (see README, "Tracing"), and internal/tracing's New (internal/tracing
// aliases it). Its tagged fields are the keys of the
// tracing: section of the YAML configuration (pkg/config decodes it
// directly); ServiceName and ServiceVersion are set in code. WithDefaults
// applies the defaults stated below, Validate checks the tagged fields. Off
// by default: no exporter runs and no span is made. New does not read
// Enabled: the daemon calls it only when Enabled is set.
type TracingConfig struct {
	// Enabled turns tracing on: spans are exported to OTLPEndpoint.
	// Defaults to false.
	Enabled bool `mapstructure:"enabled"`
	// ServiceName is the resource's service.name ("hookinbox-receiver");
	// OTEL_SERVICE_NAME overrides it. Required by New.
	ServiceName string `mapstructure:"-"`
	// ServiceVersion is the resource's service.version. Optional.
	ServiceVersion string `mapstructure:"-"`
	// OTLPEndpoint is the full URL spans are POSTed to with OTLP over
	// HTTP (protobuf), path included: nothing is appended to it, so a
	// collector's standard endpoint is written
	// "http://otel-collector:4318/v1/traces". http:// sends in clear text,
	// https:// uses TLS. Required when Enabled. Defaults to empty.
	OTLPEndpoint secret.URL `mapstructure:"otlp_endpoint"`
	// Headers are sent with every export request (a vendor's API key, an
	// Authorization header). Their values are secrets: reference the
	// environment ("${OTLP_API_KEY}"), and they are redacted wherever the
	// config is shown. Defaults to none: OTEL_EXPORTER_OTLP_HEADERS
	// applies.
	Headers map[string]secret.String `mapstructure:"headers"`
	// SampleRatio is the share of deliveries traced, greater than 0 and at
	// most 1; 0 (left out) means 1. The worker follows the receiver's
	// decision for each event, so a delivery is traced end to end or not
	// at all. Defaults to 1.
	SampleRatio float64 `mapstructure:"sample_ratio"`
}

// WithDefaults returns a copy of c with every zero-valued setting at its
// documented default. It is idempotent.
func (c *TracingConfig) WithDefaults() *TracingConfig {
	out := *c
	if out.SampleRatio == 0 {
		out.SampleRatio = TracingSampleRatioDefault
	}
	return &out
}

// Validate checks the settings (the tagged fields) of a Config that
// WithDefaults filled, and returns every problem found, each an error that
// starts with its key in the tracing: section ("sample_ratio: must be …"),
// joined. The endpoint is checked only when Enabled.
func (c *TracingConfig) Validate() error {
	var errs []error
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("sample_ratio: must be greater than 0 and at most 1, not %v", c.SampleRatio))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		if !validHeaderName(name) {
			errs = append(errs, fmt.Errorf("headers: %q is not a valid HTTP header name", name))
		}
	}
	if c.Enabled {
		if err := c.validateEndpoint(); err != nil {
			errs = append(errs, fmt.Errorf("otlp_endpoint: %w", err))
		}
	}
	return errors.Join(errs...)
}

// validateEndpoint checks OTLPEndpoint, which tracing needs.
func (c *TracingConfig) validateEndpoint() error {
	if c.OTLPEndpoint == "" {
		return errors.New("required when tracing.enabled is true (the full URL, such as http://otel-collector:4318/v1/traces)")
	}
	u, err := url.Parse(c.OTLPEndpoint.Reveal())
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("must be an absolute http:// or https:// URL")
	case u.User != nil:
		return errors.New("must not hold credentials; send them in tracing.headers")
	case strings.Trim(u.Path, "/") == "":
		return fmt.Errorf("must be the full URL of the traces endpoint, path included (nothing is appended): %s://%s/v1/traces for a collector",
			u.Scheme, u.Host)
	}
	return nil
}

// validHeaderName reports whether name is an HTTP header name (an RFC 9110
// token).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool {
		return r > '~' || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) < 0
}
