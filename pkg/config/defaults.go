package config

import (
	"cmp"
	"time"

	"github.com/riverqueue/river"

	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/internal/retention"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// The defaults stated in the fields' doc comments, one copy each: a default
// that a package applies to its own Config is that package's exported
// …Default constant, referred to here; the rest are config-only. ApplyDefaults
// is the only place they are applied.
const (
	defaultDatabaseMaxConns  int32 = 16
	defaultDatabasePooler          = PoolerNone
	defaultDatabaseQueryMode       = "cache_statement" // pgx's own default
	// defaultDatabasePooledQueryMode is database.query_mode's default
	// behind a transaction pooler: pgx's advice for PgBouncer, and one round
	// trip a query like cache_statement's.
	defaultDatabasePooledQueryMode               = "exec"
	defaultLogLevel                              = "info"
	defaultLogFormat                             = "json"
	defaultReceiverListen                        = "127.0.0.1:8080"
	defaultReceiverMaxBodyBytes    int64         = 1 << 20
	defaultReceiverAckTimeout      time.Duration = 4 * time.Second
	defaultReceiverShutdownDelay   time.Duration = 5 * time.Second
	defaultReceiverShutdownTimeout time.Duration = 10 * time.Second
	defaultSourceTolerance                       = provider.DefaultTolerance
	defaultQueue                                 = river.QueueDefault
	defaultWorkerListen                          = "127.0.0.1:8081"
	defaultWorkerConcurrency                     = worker.ConcurrencyDefault
	// defaultWorkerUnrouted fails an unrouted event loudly: a failed row can
	// be replayed once the routes are fixed, a row marked done cannot.
	defaultWorkerUnrouted                      = UnroutedFailed
	defaultWorkerHardStopTimeout time.Duration = 5 * time.Second
	defaultSourceRetention                     = retention.RetentionDefault
)

// ApplyDefaults fills every zero-valued field with its documented default. A
// source's max_body_bytes and ack_timeout take the source's own value, else
// its provider's preset (provider.PresetFor) where that is non-zero, else the
// receiver's; receiver.max_unverified_bytes to twice the largest of those
// when that is over its default; worker.Config.WithDefaults applies the worker's own. Those
// are applied after the values they derive from. Load calls it; it is
// exported for code that builds a Config by hand (tests, embedders). It is
// idempotent.
func (c *Config) ApplyDefaults() { c.applyDefaults(provider.PresetFor) }

// applyDefaults is ApplyDefaults with the provider presets injected.
func (c *Config) applyDefaults(presetFor func(name string) (provider.Preset, bool)) {
	c.Database.MaxConns = cmp.Or(c.Database.MaxConns, defaultDatabaseMaxConns)
	c.Database.Pooler = cmp.Or(c.Database.Pooler, defaultDatabasePooler)
	if c.Database.TransactionPooled() {
		c.Database.QueryMode = cmp.Or(c.Database.QueryMode, defaultDatabasePooledQueryMode)
	}
	c.Database.QueryMode = cmp.Or(c.Database.QueryMode, defaultDatabaseQueryMode)
	c.Database.Durability = *c.Database.Durability.WithDefaults() // the durability settings' own defaults

	c.Log.Level = cmp.Or(c.Log.Level, defaultLogLevel)
	c.Log.Format = cmp.Or(c.Log.Format, defaultLogFormat)

	r := &c.Receiver
	r.Listen = cmp.Or(r.Listen, defaultReceiverListen)
	r.MaxBodyBytes = cmp.Or(r.MaxBodyBytes, defaultReceiverMaxBodyBytes)
	r.AckTimeout = cmp.Or(r.AckTimeout, defaultReceiverAckTimeout)
	if r.ShutdownDelay == nil {
		// Only a key left out takes the default: an explicit 0s means no
		// delay.
		delay := defaultReceiverShutdownDelay
		r.ShutdownDelay = &delay
	}
	r.ShutdownTimeout = cmp.Or(r.ShutdownTimeout, defaultReceiverShutdownTimeout)
	r.BatcherConfig = *r.WithDefaults() // the group commit's own defaults

	limits := make([]int64, len(c.Sources))
	for i := range c.Sources {
		s := &c.Sources[i]
		s.Tolerance = cmp.Or(s.Tolerance, defaultSourceTolerance)
		preset, _ := presetFor(s.Provider) // An unknown provider has the zero Preset.
		s.MaxBodyBytes = cmp.Or(s.MaxBodyBytes, preset.MaxBodyBytes, r.MaxBodyBytes)
		s.AckTimeout = cmp.Or(s.AckTimeout, preset.AckTimeout, r.AckTimeout)
		s.Queue = cmp.Or(s.Queue, defaultQueue)
		s.Retention = cmp.Or(s.Retention, max(defaultSourceRetention, provider.RedeliveryWindow(s.Provider)))
		limits[i] = s.MaxBodyBytes
	}
	// The unverified-body budget must hold a body at each source's limit in
	// one client's half of it.
	r.MaxUnverifiedBytes = cmp.Or(r.MaxUnverifiedBytes, receiver.UnverifiedBytesFor(limits...))
	r.ServerConfig = receiverConfig(r).WithDefaults().ServerConfig // receiver.Config's own defaults
	// source_share is the receiver's key; the group commit's queue is
	// shared among the sources by the same share.
	r.BatcherConfig.SourceShare = r.ServerConfig.SourceShare

	w := &c.Worker
	w.Listen = cmp.Or(w.Listen, defaultWorkerListen)
	w.Concurrency = cmp.Or(w.Concurrency, defaultWorkerConcurrency)
	if len(w.Queues) == 0 {
		w.Queues = []string{defaultQueue}
	}
	w.Config = *w.Config.WithDefaults() // worker.Config's own defaults
	w.Unrouted = cmp.Or(w.Unrouted, defaultWorkerUnrouted)
	w.HardStopTimeout = cmp.Or(w.HardStopTimeout, defaultWorkerHardStopTimeout)
	w.Pace = *w.Pace.WithDefaults() // the replay pace's own defaults
	applyOutboxDefaults(w)
	for i, r := range w.Routes {
		// A route's mirror and sequence defaults are its source's
		// provider's; a route over every source ("*") takes none.
		provider := ""
		if s, ok := c.Source(r.Source); ok {
			provider = s.Provider
		}
		w.Routes[i] = r.WithDefaults(provider)
	}
	c.applyOpsDefaults()
	c.Tracing = *c.Tracing.WithDefaults() // the tracing settings' own defaults
}

// receiverConfig is the receiver's Config holding r's settings: its
// WithDefaults and Validate are the receiver's own.
func receiverConfig(r *ReceiverConfig) *receiver.Config {
	return &receiver.Config{ServerConfig: r.ServerConfig}
}

// Source returns the source named name, pointing into c.Sources.
func (c *Config) Source(name string) (*SourceConfig, bool) {
	for i := range c.Sources {
		if c.Sources[i].Name == name {
			return &c.Sources[i], true
		}
	}
	return nil, false
}
