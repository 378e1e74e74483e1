package component

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// The defaults applied to a zero HTTPConfig field (by WithDefaults, and
// by the receiver's NewHTTPServer for the fields set in code).
const (
	// MaxConnectionsDefault is HTTPConfig.MaxConnections's default.
	MaxConnectionsDefault = 2048
	// MaxHeaderBytesDefault is HTTPConfig.MaxHeaderBytes's default (32 KiB).
	MaxHeaderBytesDefault = 32 << 10
	// ReadHeaderTimeoutDefault is HTTPConfig.ReadHeaderTimeout's default.
	ReadHeaderTimeoutDefault = 5 * time.Second
	// IdleTimeoutDefault is HTTPConfig.IdleTimeout's default.
	IdleTimeoutDefault = 30 * time.Second
)

// ConnectionsPerClientFor is HTTPConfig.MaxConnectionsPerClient's default
// for a connection cap of maxConnections: a quarter of it, at least 1.
func ConnectionsPerClientFor(maxConnections int) int {
	return max(1, maxConnections/4)
}

// HTTPConfig bounds what a connection may hold before a request reaches a
// handler (internal/receiver's listener; internal/receiver aliases it). Its
// tagged fields are keys of the receiver: section of the YAML configuration
// (ServerConfig squashes them in); the others are set in code (the
// receiver's Server.HTTPConfig sets them from its Config). WithDefaults applies the
// defaults stated below, Validate checks the tagged fields.
type HTTPConfig struct {
	// MaxConnections caps the open connections. At the cap, a new
	// connection first replaces the one that has waited longest, and at
	// least a second, without a request in progress (idle between
	// keep-alive requests, or still sending its headers). Before that, a
	// connection whose request's body, not verified yet, is furthest
	// behind min_body_rate's schedule is closed (the body the
	// unverified-body budget would cut first), and after it one whose body
	// has had its grace; when there is none, the new one is answered 503
	// with Retry-After and closed. Defaults to 2048.
	MaxConnections int `mapstructure:"max_connections"`
	// MaxConnectionsPerClient caps the open connections from one TCP peer
	// address, so that one address cannot take max_connections; at the
	// cap a new one from that address replaces the address's own
	// connection whose unverified body is furthest behind min_body_rate's
	// schedule, else the one that has waited longest without a request in
	// progress, or gets 503 with Retry-After. Connections from trusted_proxies are
	// not counted (only max_connections applies to them). Defaults to a
	// quarter of max_connections; at most max_connections.
	MaxConnectionsPerClient int `mapstructure:"max_connections_per_client"`
	// MaxHeaderBytes caps a request's header block; more gets 431.
	// Defaults to 32768.
	MaxHeaderBytes int `mapstructure:"max_header_bytes"`
	// TrustedProxies are the networks of reverse proxies whose connections
	// MaxConnectionsPerClient does not count. Defaults to none.
	TrustedProxies []netip.Prefix `mapstructure:"-"`
	// ReadHeaderTimeout bounds the time a request's headers may take.
	// Defaults to 5s.
	ReadHeaderTimeout time.Duration `mapstructure:"-"`
	// IdleTimeout closes a keep-alive connection this long after its last
	// answer. Defaults to 30s.
	IdleTimeout time.Duration `mapstructure:"-"`
	// RetryAfter is sent with the 503 of a refused connection. Defaults to
	// 5s.
	RetryAfter time.Duration `mapstructure:"-"`
	// Logger gets http.Server's own errors (sampled) and refused
	// connections. Defaults to a no-op logger.
	Logger *zap.Logger `mapstructure:"-"`
}

// WithDefaults returns a copy of c with every zero-valued setting (tagged
// field) at its documented default; NewHTTPServer defaults the others. It
// is idempotent.
func (c *HTTPConfig) WithDefaults() *HTTPConfig {
	out := *c
	out.MaxConnections = cmp.Or(out.MaxConnections, MaxConnectionsDefault)
	out.MaxConnectionsPerClient = cmp.Or(out.MaxConnectionsPerClient, ConnectionsPerClientFor(out.MaxConnections))
	out.MaxHeaderBytes = cmp.Or(out.MaxHeaderBytes, MaxHeaderBytesDefault)
	return &out
}

// Validate checks the settings (the tagged fields) of an HTTPConfig that
// WithDefaults filled, and returns every problem found, each an error that
// starts with its key in the receiver: section, joined.
func (c *HTTPConfig) Validate() error {
	var errs []error
	positive := func(key string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", key))
		}
	}
	positive("max_connections", c.MaxConnections)
	positive("max_connections_per_client", c.MaxConnectionsPerClient)
	if c.MaxConnections > 0 && c.MaxConnectionsPerClient > c.MaxConnections {
		errs = append(errs, fmt.Errorf("max_connections_per_client: must be at most receiver.max_connections (%d)", c.MaxConnections))
	}
	positive("max_header_bytes", c.MaxHeaderBytes)
	return errors.Join(errs...)
}
