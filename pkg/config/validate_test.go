package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	t.Parallel()

	t.Run("AcceptsValidConfig", func(t *testing.T) {
		t.Parallel()

		require.NoError(t, validConfig().Validate())
	})

	t.Run("AcceptsNoSourcesAndNoRoutes", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{Database: DatabaseConfig{URL: "host=localhost dbname=hookinbox"}}
		cfg.ApplyDefaults()
		require.NoError(t, cfg.Validate())
	})

	t.Run("AcceptsGoodValues", func(t *testing.T) {
		t.Parallel()

		for name, mutate := range map[string]func(*Config){
			"PostgresqlScheme":   func(c *Config) { c.Database.URL = "postgresql://u:p@h:5432/db?sslmode=require" },
			"UnixSocketURL":      func(c *Config) { c.Database.URL = "postgres:///hookinbox?host=/var/run/postgresql" },
			"KeyValueDSN":        func(c *Config) { c.Database.URL = "host=db port=5432 user=app password='a b\\'c' dbname=hookinbox" },
			"ListenAllPort0":     func(c *Config) { c.Receiver.Listen = ":0" },
			"ListenIPv6":         func(c *Config) { c.Worker.Listen = "[::1]:8081" },
			"ProviderReplaced":   func(c *Config) { c.Sources[0].Provider = "shopify" },
			"UnroutedFailed":     func(c *Config) { c.Worker.Unrouted = UnroutedFailed },
			"ExactType":          func(c *Config) { c.Worker.Routes[0].Types = []string{"charge.refunded", "ping"} },
			"SourceNameWithDash": func(c *Config) { c.Sources[0].Name = "stripe-eu_2"; c.Worker.Routes[0].Source = "stripe-eu_2" },
			"QueueWithDash":      func(c *Config) { c.Sources[0].Queue = "bank-slow"; c.Worker.Queues = []string{"default", "bank-slow"} },
			"RouteAfterNarrower": func(c *Config) {
				c.Worker.Routes = []RouteConfig{
					{Source: "stripe", Types: []string{"charge.*"}, Handlers: []string{"log"}},
					{Source: "stripe", Types: []string{"*"}, Handlers: []string{"noop"}},
					{Source: "bank", Types: []string{"*"}, Handlers: []string{"noop"}},
				}
			},
		} {
			cfg := validConfig()
			mutate(cfg)
			require.NoError(t, cfg.Validate(), name)
		}
	})

	t.Run("RejectsBadValuesNamingTheKey", func(t *testing.T) {
		t.Parallel()

		for _, tt := range []struct {
			name   string
			mutate func(*Config)
			want   string
		}{
			{"DatabaseURLMissing", func(c *Config) { c.Database.URL = "" }, "database.url: required"},
			{"DatabaseURLWrongScheme", func(c *Config) { c.Database.URL = "mysql://u:" + testDatabasePassword + "@h/db" }, "database.url: URL scheme must be postgres:// or postgresql://"},
			{"DatabaseURLUnparseable", func(c *Config) { c.Database.URL = "postgres://u:" + testDatabasePassword + "@h:port/db" }, "database.url: not a valid URL"},
			{"DatabaseURLNotDSN", func(c *Config) { c.Database.URL = "localhost" }, "database.url: must be a postgres:// or postgresql:// URL or a key=value connection string"},
			{"DatabaseDSNUnterminated", func(c *Config) { c.Database.URL = "host=h password='" + testDatabasePassword }, "database.url: must be a postgres:// or postgresql:// URL or a key=value connection string: unterminated quoted value"},
			{"MaxConnsNegative", func(c *Config) { c.Database.MaxConns = -1 }, "database.max_conns: must be positive"},
			{"LogLevel", func(c *Config) { c.Log.Level = "verbose" }, `log.level: must be debug, info, warn or error, not "verbose"`},
			{"LogFormat", func(c *Config) { c.Log.Format = "xml" }, `log.format: must be json or console, not "xml"`},
			{"ReceiverListenNoPort", func(c *Config) { c.Receiver.Listen = "localhost" }, `receiver.listen: "localhost" is not host:port`},
			{"ReceiverListenBadPort", func(c *Config) { c.Receiver.Listen = "localhost:99999" }, `receiver.listen: "localhost:99999": port must be a number from 0 to 65535`},
			{"ReceiverMaxBodyBytes", func(c *Config) { c.Receiver.MaxBodyBytes = -1 }, "receiver.max_body_bytes: must be positive"},
			{"ReceiverAckTimeout", func(c *Config) { c.Receiver.AckTimeout = -time.Second }, "receiver.ack_timeout: must be positive"},
			{"ReceiverRetryAfter", func(c *Config) { c.Receiver.RetryAfter = -time.Second }, "receiver.retry_after: must be positive"},
			{"ReceiverShutdownTimeout", func(c *Config) { c.Receiver.ShutdownTimeout = -time.Second }, "receiver.shutdown_timeout: must be positive"},
			{"SourceNameMissing", func(c *Config) { c.Sources[1].Name = "" }, "sources[1].name: required"},
			{"SourceNameUppercase", func(c *Config) { c.Sources[1].Name = "Bank" }, `sources[1].name: "Bank" must match ^[a-z0-9][a-z0-9_-]*$`},
			{"SourceNameLeadingDash", func(c *Config) { c.Sources[1].Name = "-bank" }, `sources[1].name: "-bank" must match`},
			{"SourceNameSlash", func(c *Config) { c.Sources[1].Name = "a/b" }, `sources[1].name: "a/b" must match`},
			{"SourceNameDuplicate", func(c *Config) { c.Sources[1].Name = "stripe" }, `sources[1].name: duplicate "stripe" (also sources[0])`},
			{"ProviderMissing", func(c *Config) { c.Sources[0].Provider = "" }, "sources[0].provider: required (one of stripe, shopify, standardwebhooks)"},
			{"ProviderUnknown", func(c *Config) { c.Sources[0].Provider = "github" }, `sources[0].provider: unknown "github" (known: stripe, shopify, standardwebhooks)`},
			{"SecretsMissing", func(c *Config) { c.Sources[0].Secrets = nil }, "sources[0].secrets: at least one secret is required (secrets or secrets_file)"},
			{"SecretEmpty", func(c *Config) { c.Sources[0].Secrets = []string{testSecret, ""} }, "sources[0].secrets[1]: must not be empty"},
			{"SecretBlank", func(c *Config) { c.Sources[0].Secrets = []string{" \t"} }, "sources[0].secrets[0]: must not be empty"},
			{"SourceTolerance", func(c *Config) { c.Sources[0].Tolerance = -time.Minute }, "sources[0].tolerance: must be positive"},
			{"SourceMaxBodyBytes", func(c *Config) { c.Sources[0].MaxBodyBytes = -1 }, "sources[0].max_body_bytes: must be positive"},
			{"SourceAckTimeout", func(c *Config) { c.Sources[0].AckTimeout = -time.Second }, "sources[0].ack_timeout: must be positive"},
			{"SourceQueueEmpty", func(c *Config) { c.Sources[0].Queue = "" }, "sources[0].queue: required"},
			{"SourceQueueInvalid", func(c *Config) { c.Sources[0].Queue = "Bank Queue" }, `sources[0].queue: "Bank Queue" must be lowercase letters and digits separated by _ or -`},
			{"SourceQueueTooLong", func(c *Config) { c.Sources[0].Queue = strings.Repeat("q", 65) }, "sources[0].queue: longer than 64 characters"},
			{"WorkerListen", func(c *Config) { c.Worker.Listen = "8081" }, `worker.listen: "8081" is not host:port`},
			{"WorkerConcurrency", func(c *Config) { c.Worker.Concurrency = -1 }, "worker.concurrency: must be positive"},
			{"WorkerQueuesEmpty", func(c *Config) { c.Worker.Queues = nil }, "worker.queues: at least one queue is required"},
			{"WorkerQueueInvalid", func(c *Config) { c.Worker.Queues = []string{"default", "bank__x"} }, `worker.queues[1]: "bank__x" must be lowercase letters`},
			{"WorkerQueueDuplicate", func(c *Config) { c.Worker.Queues = []string{"default", "bank", "default"} }, `worker.queues[2]: duplicate "default" (also worker.queues[0])`},
			{"WorkerMaxAttempts", func(c *Config) { c.Worker.MaxAttempts = -1 }, "worker.max_attempts: must be positive"},
			{"WorkerJobTimeout", func(c *Config) { c.Worker.JobTimeout = -time.Second }, "worker.job_timeout: must be positive"},
			{"WorkerRescueAfterNegative", func(c *Config) { c.Worker.RescueAfter = -time.Second }, "worker.rescue_after: must be positive"},
			{"WorkerRescueAfterEqualsJobTimeout", func(c *Config) { c.Worker.RescueAfter = c.Worker.JobTimeout }, "worker.rescue_after: must exceed worker.job_timeout (1m0s)"},
			{"WorkerReaperInterval", func(c *Config) { c.Worker.ReaperInterval = -time.Second }, "worker.reaper_interval: must be positive"},
			{"WorkerOrphanAfter", func(c *Config) { c.Worker.OrphanAfter = -time.Second }, "worker.orphan_after: must be positive"},
			{"WorkerUnrouted", func(c *Config) { c.Worker.Unrouted = "drop" }, `worker.unrouted: must be done or failed, not "drop"`},
			{"WorkerSoftStopTimeout", func(c *Config) { c.Worker.SoftStopTimeout = -time.Second }, "worker.soft_stop_timeout: must be positive"},
			{"WorkerHardStopTimeout", func(c *Config) { c.Worker.HardStopTimeout = -time.Second }, "worker.hard_stop_timeout: must be positive"},
			{"RouteSourceMissing", func(c *Config) { c.Worker.Routes[0].Source = "" }, `worker.routes[0].source: required (a source name, or "*" for any)`},
			{"RouteSourceUnknown", func(c *Config) { c.Worker.Routes[0].Source = "strpe" }, `worker.routes[0].source: unknown source "strpe"`},
			{"RouteTypesEmpty", func(c *Config) { c.Worker.Routes[0].Types = []string{} }, "worker.routes[0].types: at least one type pattern is required"},
			{"RouteTypeEmpty", func(c *Config) { c.Worker.Routes[0].Types = []string{""} }, "worker.routes[0].types[0]: must not be empty"},
			{"RouteTypeInnerStar", func(c *Config) { c.Worker.Routes[0].Types = []string{"charge.*", "pay*"} }, `worker.routes[0].types[1]: "pay*": must be "*", an exact event type, or a prefix ending in ".*"`},
			{"RouteTypeBareDotStar", func(c *Config) { c.Worker.Routes[0].Types = []string{".*"} }, `worker.routes[0].types[0]: ".*": must be`},
			{"RouteTypeDoubleStar", func(c *Config) { c.Worker.Routes[0].Types = []string{"*.*"} }, `worker.routes[0].types[0]: "*.*": must be`},
			{"RouteTypeWhitespace", func(c *Config) { c.Worker.Routes[0].Types = []string{"charge. refunded"} }, `worker.routes[0].types[0]: "charge. refunded" contains whitespace`},
			{"RouteHandlersMissing", func(c *Config) { c.Worker.Routes[1].Handlers = nil }, "worker.routes[1].handlers: at least one handler is required"},
			{"RouteHandlerEmpty", func(c *Config) { c.Worker.Routes[1].Handlers = []string{"log", ""} }, "worker.routes[1].handlers[1]: must not be empty"},
			{"RouteAfterCatchAllForAnySource", func(c *Config) {
				c.Worker.Routes = append(c.Worker.Routes, RouteConfig{Source: "bank", Types: []string{"*"}, Handlers: []string{"log"}})
			}, `worker.routes[2]: unreachable: worker.routes[1] already matches every event of source "bank"`},
			{"RouteAfterCatchAllForItsSource", func(c *Config) {
				c.Worker.Routes = []RouteConfig{
					{Source: "stripe", Types: []string{"*"}, Handlers: []string{"log"}},
					{Source: "stripe", Types: []string{"charge.*"}, Handlers: []string{"noop"}},
				}
			}, `worker.routes[1]: unreachable: worker.routes[0] already matches every event of source "stripe"`},
		} {
			cfg := validConfig()
			tt.mutate(cfg)
			err := cfg.Validate()
			require.ErrorContains(t, err, tt.want, tt.name)
			require.NotContains(t, err.Error(), testSecret, tt.name)
			require.NotContains(t, err.Error(), testDatabasePassword, tt.name)
		}
	})

	t.Run("ReportsEveryProblemAtOnce", func(t *testing.T) {
		t.Parallel()

		cfg := validConfig()
		cfg.Receiver.AckTimeout = -1
		cfg.Sources[1].Name = "stripe"
		cfg.Worker.Unrouted = "maybe"

		require.EqualError(t, cfg.Validate(), "receiver.ack_timeout: must be positive\n"+
			`sources[1].name: duplicate "stripe" (also sources[0])`+"\n"+
			`worker.unrouted: must be done or failed, not "maybe"`)
	})

	t.Run("UsesKnownProviders", func(t *testing.T) {
		t.Parallel()

		// KnownProviders is package state, so this only reads it; see
		// TestValidateKnownProvidersReplaced for replacing it.
		cfg := validConfig()
		cfg.Sources[0].Provider = "shopify"
		require.NoError(t, cfg.Validate())
	})
}

// TestValidateKnownProvidersReplaced replaces package state, so it is serial.
// Go runs serial top-level tests before any parallel one resumes.
func TestValidateKnownProvidersReplaced(t *testing.T) {
	saved := KnownProviders
	t.Cleanup(func() { KnownProviders = saved })
	KnownProviders = append([]string{"github"}, saved...)

	cfg := validConfig()
	cfg.Sources[0].Provider = "github"
	require.NoError(t, cfg.Validate())

	KnownProviders = []string{"github"}
	require.ErrorContains(t, cfg.Validate(), `sources[1].provider: unknown "standardwebhooks" (known: github)`)
}
