package component

import (
	"time"

	"go.uber.org/zap/zapcore"
)

// ServerConfig holds the receiver's settings: its tagged fields are the keys
// of the receiver: section of the YAML configuration that configure
// internal/receiver's Server (pkg/config squashes them in); BodyGrace and
// DeliveryLogLevel are set in code. The receiver's Config embeds it
// beside what is set in code, and its WithDefaults and Validate apply the
// defaults stated below and check these fields.
type ServerConfig struct {
	// RetryAfter is the Retry-After hint sent with a 503. Defaults to 5s.
	RetryAfter time.Duration `mapstructure:"retry_after"`
	// MaxInFlight bounds the verified deliveries handled at once, from
	// their verification to the answer; one more gets 503 with
	// Retry-After. Defaults to 1024.
	MaxInFlight int `mapstructure:"max_in_flight"`
	// SourceShare is the share of the max_in_flight slots (and of the
	// group commit's batch_queue) that the other sources leave which one
	// source may hold, rounded down, at least one: past it the source's
	// delivery gets 503 with Retry-After, so that one source's storm cannot
	// take the slots another source needs. At 0.5 a source alone may hold
	// half of max_in_flight, a second one half of the rest, and so on. 1
	// turns it off (any free slot to any source). More than 0, at most 1.
	// Defaults to 0.5.
	SourceShare float64 `mapstructure:"source_share"`
	// MaxUnverifiedBytes bounds the bytes held by bodies whose signature is
	// not known yet, across all requests; one client address may hold half
	// of it. When a body does not fit, the bodies being read furthest
	// behind min_body_rate's schedule (of any address, or of its own for
	// its half) are cut to make room (503 with Retry-After); when there is
	// none, the body gets 503 with Retry-After, before it is read when it
	// has a Content-Length. Defaults to 67108864 (64 MiB), or twice the
	// largest source's max_body_bytes when that is more; it must be at
	// least that.
	MaxUnverifiedBytes int64 `mapstructure:"max_unverified_bytes"`
	// MaxUnverifiedPerClient bounds the requests one client address may
	// have whose signature is not known yet. At the bound, the address's
	// own body furthest behind min_body_rate's schedule (minimum rate ×
	// its age − bytes received: the oldest with the least progress; a body
	// ahead of the schedule only after BodyGrace) is cut to make room (503
	// with Retry-After), so that a sender at normal speed gets through
	// where every client shares one address; when there is none, the new
	// request gets 503 with Retry-After before its body is read. Defaults
	// to 64.
	MaxUnverifiedPerClient int `mapstructure:"max_unverified_per_client"`
	// MinBodyRate is the slowest a body may arrive, in bytes per second,
	// after a grace second; a slower one gets 408. Defaults to 16384.
	MinBodyRate int64 `mapstructure:"min_body_rate"`
	// BodyGrace is the time a body gets before MinBodyRate counts; a
	// request refused before its body is read drains it for this long at
	// most. Defaults to 1s.
	BodyGrace time.Duration `mapstructure:"-"`
	// TrustedProxies are the networks of reverse proxies (an ingress, a load
	// balancer) whose X-Forwarded-For header is believed when a source's
	// allow_ips is checked and max_unverified_per_client counted, and whose
	// connections max_connections_per_client does not count; entries are
	// written like allow_ips entries. Defaults to none: the TCP peer is the
	// client.
	TrustedProxies []string `mapstructure:"trusted_proxies"`
	// DeliveryLogLevel is the level of the line logged for each delivery
	// answered 2xx (stored, duplicate, handshake). Refused deliveries are
	// logged at warn, failed commits at error, and requests for an unknown
	// source or with another method than POST at debug. The zero value is
	// info.
	DeliveryLogLevel zapcore.Level `mapstructure:"-"`
	// HTTPConfig holds the connection limits (max_connections,
	// max_connections_per_client, max_header_bytes); New ignores them, the
	// listener applies them (see HTTP).
	HTTPConfig `mapstructure:",squash"`
}
