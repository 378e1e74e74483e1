package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Redacted returns the configuration as nested maps keyed like the YAML
// file, safe to log: the database URL's password and a source URL's password
// are "xxxxx", a source's secrets and hmac.api_keys are replaced by their
// count, basic_auth passwords by "redacted" (usernames show), and durations
// are strings ("4s").
// With zap: logger.Info("config", zap.Any("config", cfg.Redacted())).
func (c *Config) Redacted() map[string]any {
	sources := make([]any, len(c.Sources))
	for i := range c.Sources {
		sources[i] = c.Sources[i].redacted()
	}
	routes := make([]any, len(c.Worker.Routes))
	for i, route := range c.Worker.Routes {
		m := map[string]any{
			"source":   route.Source,
			"types":    route.Types,
			"handlers": route.Handlers,
		}
		route.redactedOrdering(m)
		filter := make([]any, len(route.Filter))
		for j, f := range route.Filter {
			filter[j] = map[string]any{"path": f.Path, "in": f.In}
		}
		m["filter"] = filter
		m["destinations"] = route.Destinations
		routes[i] = m
	}
	r, w := &c.Receiver, &c.Worker
	out := map[string]any{
		"database": c.Database.redacted(),
		"log": map[string]any{
			"level":  c.Log.Level,
			"format": c.Log.Format,
		},
		"receiver": map[string]any{
			"listen":                     r.Listen,
			"max_body_bytes":             r.MaxBodyBytes,
			"ack_timeout":                duration(r.AckTimeout),
			"retry_after":                duration(r.RetryAfter),
			"shutdown_delay":             durationPtr(r.ShutdownDelay),
			"shutdown_timeout":           duration(r.ShutdownTimeout),
			"batch_max_events":           r.BatchMaxEvents,
			"batch_max_wait":             duration(r.BatchMaxWait),
			"batch_flushers":             r.BatchFlushers,
			"batch_queue":                r.BatchQueue,
			"max_in_flight":              r.MaxInFlight,
			"max_unverified_bytes":       r.MaxUnverifiedBytes,
			"max_unverified_per_client":  r.MaxUnverifiedPerClient,
			"min_body_rate":              r.MinBodyRate,
			"max_connections":            r.MaxConnections,
			"max_connections_per_client": r.MaxConnectionsPerClient,
			"max_header_bytes":           r.MaxHeaderBytes,
			"read_header_timeout":        duration(r.ReadHeaderTimeout),
			"idle_timeout":               duration(r.IdleTimeout),
			"delivery_log_level":         r.DeliveryLogLevel,
			"trusted_proxies":            r.TrustedProxies,
			"rejections":                 r.Rejections.redacted(),
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
			"prune_interval":      duration(w.PruneInterval),
			"prune_batch":         w.PruneBatch,
			"replay_rate":         w.ReplayRate,
			"replay_batch":        w.ReplayBatch,
			"unrouted":            w.Unrouted,
			"synchronous_commit":  w.SynchronousCommit,
			"group_max_events":    w.GroupMaxEvents,
			"isolation":           w.Isolation,
			"soft_stop_timeout":   duration(w.SoftStopTimeout),
			"hard_stop_timeout":   duration(w.HardStopTimeout),
			"routes":              routes,
			"ui":                  w.UI.redacted(),
			"pause_refresh":       duration(w.PauseRefresh),
			"admin":               w.Admin.redacted(),
		},
		"tracing": c.Tracing.redacted(),
	}
	w.redactedOutbox(out["worker"].(map[string]any))
	return out
}

func (d *DatabaseConfig) redacted() map[string]any {
	return map[string]any{
		"url":        RedactDatabaseURL(d.URL),
		"max_conns":  d.MaxConns,
		"pooler":     d.Pooler,
		"query_mode": d.QueryMode,
	}
}

func (s *SourceConfig) redacted() map[string]any {
	basicAuth := make([]any, len(s.BasicAuth))
	for i := range s.BasicAuth {
		basicAuth[i] = s.BasicAuth[i].redacted()
	}
	return map[string]any{
		"name":              s.Name,
		"provider":          s.Provider,
		"secrets":           fmt.Sprintf("%d redacted", len(s.Secrets)),
		"secrets_file":      s.SecretsFile,
		"tolerance":         duration(s.Tolerance),
		"retention":         duration(s.Retention),
		"payload_retention": duration(s.PayloadRetention),
		"max_body_bytes":    s.MaxBodyBytes,
		"ack_timeout":       duration(s.AckTimeout),
		"queue":             s.Queue,
		"basic_auth":        basicAuth,
		"url":               redactURL(s.URL), // Twilio accepts credentials in the URL.
		"algorithm":         s.Algorithm,
		"twin_types":        s.TwinTypes,
		"allow_ips":         s.AllowIPs,
		"hmac":              s.HMAC.redacted(),
		"reconcile":         s.Reconcile.redacted(),
	}
}

func (b *BasicAuthConfig) redacted() map[string]any {
	return map[string]any{
		"username": b.Username,
		"password": redactValue(b.Password),
	}
}

func (u *WorkerUIConfig) redacted() map[string]any {
	basicAuth := make([]any, len(u.BasicAuth))
	for i := range u.BasicAuth {
		basicAuth[i] = u.BasicAuth[i].redacted()
	}
	return map[string]any{
		"enabled":    u.Enabled,
		"read_only":  u.ReadOnly,
		"basic_auth": basicAuth,
	}
}

func (h *HMACConfig) redacted() map[string]any {
	return map[string]any{
		"header":           h.Header,
		"prefix":           h.Prefix,
		"encoding":         h.Encoding,
		"template":         h.Template,
		"timestamp_header": h.TimestampHeader,
		"id_header":        h.IDHeader,
		"id_path":          h.IDPath,
		"type_header":      h.TypeHeader,
		"type_path":        h.TypePath,
		"api_key_header":   h.APIKeyHeader,
		"api_keys":         fmt.Sprintf("%d redacted", len(h.APIKeys)),
		"challenge_path":   h.ChallengePath,
	}
}

// redactValue hides a credential but shows that it is empty, which
// Validate refuses anyway.
func redactValue(v string) string {
	if v == "" {
		return ""
	}
	return "redacted"
}

func duration(d time.Duration) string { return d.String() }

// durationPtr is duration for a key whose zero is explicit; nil (only
// before ApplyDefaults) reads "default".
func durationPtr(d *time.Duration) string {
	if d == nil {
		return "default"
	}
	return d.String()
}

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

// String returns the credentials as JSON with the password redacted.
func (b BasicAuthConfig) String() string { return toJSON(b.redacted()) }

// GoString is String, so %#v never leaks the password.
func (b BasicAuthConfig) GoString() string { return b.String() }

// String returns the hmac settings as JSON with the API keys replaced by
// their count.
func (h HMACConfig) String() string { return toJSON(h.redacted()) }

// GoString is String, so %#v never leaks API keys.
func (h HMACConfig) GoString() string { return h.String() }

func toJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // Keep & in URL queries readable.
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("<unprintable config: %v>", err) // Maps of plain values always encode.
	}
	return strings.TrimSuffix(b.String(), "\n")
}
