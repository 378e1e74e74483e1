package config

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

// TracingConfig configures OpenTelemetry tracing in the receiver and the
// worker (see README, "Tracing"). Off by default: no exporter runs and no
// span is made.
type TracingConfig struct {
	// Enabled turns tracing on: spans are exported to OTLPEndpoint.
	// Defaults to false.
	Enabled bool `mapstructure:"enabled"`
	// OTLPEndpoint is the full URL spans are POSTed to with OTLP over
	// HTTP (protobuf), path included: nothing is appended to it, so a
	// collector's standard endpoint is written
	// "http://otel-collector:4318/v1/traces". http:// sends in clear text,
	// https:// uses TLS. Required when Enabled. Defaults to empty.
	OTLPEndpoint secret.URL `mapstructure:"otlp_endpoint"`
	// Headers are sent with every export request (a vendor's API key, an
	// Authorization header). Their values are secrets: reference the
	// environment ("${OTLP_API_KEY}"), and they are redacted wherever the
	// config is shown. Defaults to none.
	Headers map[string]secret.String `mapstructure:"headers"`
	// SampleRatio is the share of deliveries traced, greater than 0 and at
	// most 1; 0 (left out) means 1. The worker follows the receiver's
	// decision for each event, so a delivery is traced end to end or not
	// at all. Defaults to 1.
	SampleRatio float64 `mapstructure:"sample_ratio"`
}

// defaultTracingSampleRatio is tracing.sample_ratio's default: every
// delivery.
const defaultTracingSampleRatio = 1.0

func (c *Config) applyTracingDefaults() {
	if c.Tracing.SampleRatio == 0 {
		c.Tracing.SampleRatio = defaultTracingSampleRatio
	}
}

func (c *Config) validateTracing(p *problems) {
	t := &c.Tracing
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		p.addf("tracing.sample_ratio", "must be greater than 0 and at most 1, not %v", t.SampleRatio)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		if !validHeaderName(name) {
			p.addf("tracing.headers", "%q is not a valid HTTP header name", name)
		}
	}
	if !t.Enabled {
		return
	}
	if t.OTLPEndpoint == "" {
		p.addf("tracing.otlp_endpoint", "required when tracing.enabled is true (the full URL, such as http://otel-collector:4318/v1/traces)")
		return
	}
	u, err := url.Parse(t.OTLPEndpoint.Reveal())
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p.addf("tracing.otlp_endpoint", "must be an absolute http:// or https:// URL")
	case u.User != nil:
		p.addf("tracing.otlp_endpoint", "must not hold credentials; send them in tracing.headers")
	case strings.Trim(u.Path, "/") == "":
		p.addf("tracing.otlp_endpoint", "must be the full URL of the traces endpoint, path included (nothing is appended): %s://%s/v1/traces for a collector",
			u.Scheme, u.Host)
	}
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
