package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Redacted returns the configuration as nested maps keyed like the YAML
// file, safe to log: the database URL's password is "xxxxx", a source's
// secrets are replaced by their count, and durations are strings ("4s").
// With zap: logger.Info("config", zap.Any("config", cfg.Redacted())).
func (c *Config) Redacted() map[string]any {
	sources := make([]any, len(c.Sources))
	for i := range c.Sources {
		sources[i] = c.Sources[i].redacted()
	}
	routes := make([]any, len(c.Worker.Routes))
	for i, route := range c.Worker.Routes {
		routes[i] = map[string]any{
			"source":   route.Source,
			"types":    route.Types,
			"handlers": route.Handlers,
		}
	}
	r, w := &c.Receiver, &c.Worker
	return map[string]any{
		"database": c.Database.redacted(),
		"log": map[string]any{
			"level":  c.Log.Level,
			"format": c.Log.Format,
		},
		"receiver": map[string]any{
			"listen":           r.Listen,
			"max_body_bytes":   r.MaxBodyBytes,
			"ack_timeout":      duration(r.AckTimeout),
			"retry_after":      duration(r.RetryAfter),
			"shutdown_timeout": duration(r.ShutdownTimeout),
		},
		"sources": sources,
		"worker": map[string]any{
			"listen":              w.Listen,
			"concurrency":         w.Concurrency,
			"queues":              w.Queues,
			"max_attempts":        w.MaxAttempts,
			"job_timeout":         duration(w.JobTimeout),
			"fetch_cooldown":      duration(w.FetchCooldown),
			"fetch_poll_interval": duration(w.FetchPollInterval),
			"rescue_after":        duration(w.RescueAfter),
			"reaper_interval":     duration(w.ReaperInterval),
			"orphan_after":        duration(w.OrphanAfter),
			"unrouted":            w.Unrouted,
			"soft_stop_timeout":   duration(w.SoftStopTimeout),
			"hard_stop_timeout":   duration(w.HardStopTimeout),
			"routes":              routes,
		},
	}
}

func (d *DatabaseConfig) redacted() map[string]any {
	return map[string]any{
		"url":       RedactDatabaseURL(d.URL),
		"max_conns": d.MaxConns,
	}
}

func (s *SourceConfig) redacted() map[string]any {
	return map[string]any{
		"name":           s.Name,
		"provider":       s.Provider,
		"secrets":        fmt.Sprintf("%d redacted", len(s.Secrets)),
		"secrets_file":   s.SecretsFile,
		"tolerance":      duration(s.Tolerance),
		"max_body_bytes": s.MaxBodyBytes,
		"ack_timeout":    duration(s.AckTimeout),
		"queue":          s.Queue,
	}
}

func duration(d time.Duration) string { return d.String() }

// String returns Redacted as JSON, so printing a Config never leaks secrets.
func (c Config) String() string { return toJSON(c.Redacted()) }

// GoString is String, so %#v never leaks secrets either.
func (c Config) GoString() string { return c.String() }

// LogValue makes slog log Redacted rather than the raw struct.
func (c Config) LogValue() slog.Value { return slog.AnyValue(c.Redacted()) }

// String returns the database config as JSON with the password redacted.
func (d DatabaseConfig) String() string { return toJSON(d.redacted()) }

// GoString is String, so %#v never leaks the password.
func (d DatabaseConfig) GoString() string { return d.String() }

// String returns the source as JSON with its secrets replaced by their count.
func (s SourceConfig) String() string { return toJSON(s.redacted()) }

// GoString is String, so %#v never leaks secrets.
func (s SourceConfig) GoString() string { return s.String() }

func toJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // Keep & in URL queries readable.
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("<unprintable config: %v>", err) // Maps of plain values always encode.
	}
	return strings.TrimSuffix(b.String(), "\n")
}
