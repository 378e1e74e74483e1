package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestLoad(t *testing.T) {
	t.Parallel()

	t.Run("ReadsFileValues", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
log:
  level: debug
  format: console
receiver:
  listen: 0.0.0.0:9000
  max_body_bytes: 2048
  ack_timeout: 2s
worker:
  concurrency: 4
  queues: [default, bank]
  job_timeout: 5m
  routes:
    - source: stripe
      types: ["payment_intent.*", "charge.refunded"]
      handlers: [log, noop]
`)
		cfg, err := loadIn(path, everything, nil)
		require.NoError(t, err)

		require.Equal(t, "debug", cfg.Log.Level)
		require.Equal(t, "console", cfg.Log.Format)
		require.Equal(t, "0.0.0.0:9000", cfg.Receiver.Listen)
		require.Equal(t, int64(2048), cfg.Receiver.MaxBodyBytes)
		require.Equal(t, 2*time.Second, cfg.Receiver.AckTimeout)
		require.Equal(t, []SourceConfig{{
			Name:         "stripe",
			Provider:     "stripe",
			Secrets:      []secret.String{testSecret},
			Tolerance:    5 * time.Minute,
			MaxBodyBytes: 2048,            // Inherited from receiver.
			AckTimeout:   2 * time.Second, // Inherited from receiver.
			Queue:        "default",
			Retention:    720 * time.Hour,
			Reconcile:    component.ReconcileConfig{APIBaseURL: "https://api.stripe.com", Interval: 15 * time.Minute, Lookback: time.Hour},
		}}, cfg.Sources)
		require.Equal(t, 4, cfg.Worker.Concurrency)
		require.Equal(t, []string{"default", "bank"}, cfg.Worker.Queues)
		require.Equal(t, 5*time.Minute, cfg.Worker.JobTimeout)
		require.Equal(t, 5*time.Minute+30*time.Second, cfg.Worker.RescueAfter)
		require.Equal(t, []worker.Route{{
			Source:   "stripe",
			Types:    []string{"payment_intent.*", "charge.refunded"},
			Handlers: []string{"log", "noop"},
		}}, cfg.Worker.Routes)
	})

	t.Run("AppliesEveryDocumentedDefault", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
worker:
  routes:
    - source: "*"
      handlers: [noop]
`)
		cfg, err := loadIn(path, everything, nil)
		require.NoError(t, err)

		require.Equal(t, &Config{
			Database: DatabaseConfig{
				URL:        "postgres://hookinbox:" + testDatabasePassword + "@localhost:5432/hookinbox",
				Pooler:     PoolerNone,
				QueryMode:  "cache_statement",
				MaxConns:   16,
				Durability: component.DurabilityConfig{Require: component.RequireNone},
			},
			Log: LogConfig{Level: "info", Format: "json"},
			Receiver: ReceiverConfig{
				Listen:          "127.0.0.1:8080",
				MaxBodyBytes:    1048576,
				AckTimeout:      4 * time.Second,
				ShutdownDelay:   new(5 * time.Second),
				ShutdownTimeout: 10 * time.Second,
				BatcherConfig:   component.BatcherConfig{MaxEvents: 256, Flushers: 4, QueueSize: 1024, SourceShare: 0.5},
				ServerConfig: component.ServerConfig{RetryAfter: 5 * time.Second, MaxInFlight: 1024, SourceShare: 0.5, MaxUnverifiedBytes: 64 << 20, MaxUnverifiedPerClient: 64, MinBodyRate: 16384, BodyGrace: time.Second,
					HTTPConfig: component.HTTPConfig{MaxConnections: 2048, MaxConnectionsPerClient: 512, MaxHeaderBytes: 32768}},
				Rejections: RejectionsConfig{RecorderConfig: component.RecorderConfig{Keep: 20, SampleBurst: 5, SampleEvery: 10 * time.Second}},
			},
			Sources: []SourceConfig{{
				Name:         "stripe",
				Provider:     "stripe",
				Secrets:      []secret.String{testSecret},
				Tolerance:    5 * time.Minute,
				MaxBodyBytes: 1048576,
				AckTimeout:   4 * time.Second,
				Queue:        "default",
				Retention:    720 * time.Hour,
				Reconcile:    component.ReconcileConfig{APIBaseURL: "https://api.stripe.com", Interval: 15 * time.Minute, Lookback: time.Hour},
			}},
			Worker: WorkerConfig{
				Listen:      "127.0.0.1:8081",
				Concurrency: 1000,
				Queues:      []string{"default"},
				Config: worker.Config{
					MaxAttempts:       10,
					JobTimeout:        time.Minute,
					RescueAfter:       90 * time.Second,
					FetchCooldown:     10 * time.Millisecond,
					FetchPollInterval: time.Second,
					ReaperInterval:    time.Minute,
					OrphanAfter:       5 * time.Minute,
					PruneInterval:     time.Hour,
					PruneBatch:        1000,
					GroupMaxEvents:    50,
					SoftStopTimeout:   20 * time.Second,
					Isolation:         "read_committed",
					PauseRefresh:      time.Second,
					HeartbeatInterval: 10 * time.Second,
					Routes:            []worker.Route{{Source: "*", Types: []string{"*"}, Handlers: []string{"noop"}}},
				},
				Pace:            component.Pace{Rate: 500, Batch: 100},
				Unrouted:        "failed",
				HardStopTimeout: 5 * time.Second,
				Outbox:          OutboxConfig{Relay: OutboxRelayConfig{Config: relay.Config{Batch: 100, Lease: 2 * time.Minute, PollInterval: time.Second}}},
			},
			Tracing: component.TracingConfig{SampleRatio: 1},
		}, cfg)
	})

	t.Run("DecodesDurations", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
receiver:
  ack_timeout: 1500ms
  shutdown_timeout: 1m30s
worker:
  orphan_after: 2h
`)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		require.Equal(t, 1500*time.Millisecond, cfg.Receiver.AckTimeout)
		require.Equal(t, 90*time.Second, cfg.Receiver.ShutdownTimeout)
		require.Equal(t, 2*time.Hour, cfg.Worker.OrphanAfter)
	})

	t.Run("ShutdownDelayKeepsAnExplicitZero", func(t *testing.T) {
		t.Parallel()

		for value, want := range map[string]time.Duration{"": 5 * time.Second, "receiver: {shutdown_delay: 0s}": 0, "receiver: {shutdown_delay: 2s}": 2 * time.Second} {
			cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML+value+"\n"), NeedDatabase|NeedReceiver, nil)
			require.NoError(t, err, value)
			require.NotNil(t, cfg.Receiver.ShutdownDelay, value)
			require.Equal(t, want, *cfg.Receiver.ShutdownDelay, value)
		}
		env := map[string]string{"HOOKINBOX_RECEIVER_SHUTDOWN_DELAY": "0s"}
		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML), NeedDatabase|NeedReceiver, env)
		require.NoError(t, err)
		require.Equal(t, time.Duration(0), *cfg.Receiver.ShutdownDelay, "from the environment")

		_, err = loadIn(writeFile(t, "hookinbox.yaml", minimalYAML+"receiver: {shutdown_delay: -1s}\n"), NeedDatabase|NeedReceiver, nil)
		require.ErrorContains(t, err, "receiver.shutdown_delay: must not be negative")
	})

	t.Run("RejectsDurationWithoutUnit", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
receiver:
  ack_timeout: 4
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, "receiver.ack_timeout")
		require.ErrorContains(t, err, "must be a duration with a unit")
	})

	t.Run("RejectsMalformedDuration", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
worker:
  job_timeout: soon
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, "worker.job_timeout")
	})

	t.Run("RejectsUnknownKey", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
receiver:
  max_body_byte: 10
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, "receiver")
		require.ErrorContains(t, err, "max_body_byte")
	})

	t.Run("RejectsUnknownKeyInSource", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secret: "`+testSecret+`"
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, "sources[stripe].secret: unknown key (did you mean secrets?)")
		require.NotContains(t, err.Error(), testSecret)
	})

	t.Run("RejectsUnknownKeyInNestedSourceKeys", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
  - name: partner
    provider: hmac
    secrets: ["x"]
    basic_auth: [{username: u, pasword: p}]
    hmac: {hedaer: X-Signature}
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, "pasword")
		require.ErrorContains(t, err, "hedaer")
	})

	t.Run("EmptyTwinTypesIsNotUnset", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
  - name: stripe-no-twins
    provider: stripe
    secrets: ["`+testSecret+`"]
    twin_types: []
`)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		require.Nil(t, cfg.Sources[0].TwinTypes, "unset: the default list")
		require.NotNil(t, cfg.Sources[1].TwinTypes, "[]: twin keys off")
		require.Empty(t, cfg.Sources[1].TwinTypes)
		require.NotNil(t, cfg.Sources[1].ProviderConfig().TwinTypes)
	})

	t.Run("ReadsProviderKeys", func(t *testing.T) {
		t.Parallel()
		if _, ok := provider.PresetFor("hmac"); !ok {
			t.Skip(`provider "hmac" is not registered yet`)
		}

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
    twin_types: [invoice.paid]
    allow_ips: ["203.0.113.7", "198.51.100.0/24"]
  - name: partner
    provider: hmac
    secrets: ["`+testSecret+`"]
    algorithm: sha512
    basic_auth:
      - {username: partner, password: "pw-`+testSecret+`"}
    hmac:
      header: X-Signature
      prefix: "sha512="
      encoding: base64
      template: "{timestamp}.{body}"
      timestamp_header: X-Timestamp
      id_path: data.id
      type_header: X-Event
      api_key_header: X-Api-Key
      api_keys: ["key-`+testSecret+`"]
      challenge_path: challenge
receiver:
  trusted_proxies: [10.0.0.0/8, "192.0.2.1"]
`)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)

		require.Equal(t, []string{"10.0.0.0/8", "192.0.2.1"}, cfg.Receiver.TrustedProxies)
		require.Equal(t, []string{"invoice.paid"}, cfg.Sources[0].TwinTypes)
		require.Equal(t, []string{"203.0.113.7", "198.51.100.0/24"}, cfg.Sources[0].AllowIPs)
		partner := cfg.Sources[1]
		require.Equal(t, "sha512", partner.Algorithm)
		require.Equal(t, []BasicAuthConfig{{Username: "partner", Password: "pw-" + testSecret}}, partner.BasicAuth)
		require.Equal(t, HMACConfig{
			Header: "X-Signature", Prefix: "sha512=", Encoding: "base64", Template: "{timestamp}.{body}",
			TimestampHeader: "X-Timestamp", IDPath: "data.id", TypeHeader: "X-Event",
			APIKeyHeader: "X-Api-Key", APIKeys: []secret.String{"key-" + testSecret}, ChallengePath: "challenge",
		}, partner.HMAC)
	})

	t.Run("MissingFileIsAnError", func(t *testing.T) {
		t.Parallel()

		path := filepath.Join(t.TempDir(), "absent.yaml")
		_, err := loadIn(path, everything, nil)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, path)
	})

	t.Run("InvalidYAMLIsAnError", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", "database: [unclosed\n")
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, path)
	})

	t.Run("FileWithoutYAMLExtensionIsReadAsYAML", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "config", minimalYAML)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		require.Equal(t, "stripe", cfg.Sources[0].Name)
	})

	t.Run("ValidatesAfterDefaults", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
log:
  level: loud
worker:
  job_timeout: 2m
  rescue_after: 1m
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, "log.level")
		require.ErrorContains(t, err, "worker.rescue_after: must exceed worker.job_timeout")
		require.ErrorContains(t, err, path)
	})

	t.Run("KeepsLiteralDollar", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["a$b", "$HOME", "$", "${", "$${x"]
`)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"a$b", "$HOME", "$", "${", "$${x"}, secret.Reveal(cfg.Sources[0].Secrets))
	})
}

func TestLoadSecretsFile(t *testing.T) {
	t.Parallel()

	t.Run("AppendsTrimmedLinesSkippingBlanksAndComments", func(t *testing.T) {
		t.Parallel()

		secretsPath := writeFile(t, "secrets", "# rotated 2025-01-01\n  new-secret  \n\n\t\n# old one below\nold-secret\r\nlast-without-newline")
		path := writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: shopify
    provider: shopify
    secrets: ["inline"]
    secrets_file: `+secretsPath+`
`)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"inline", "new-secret", "old-secret", "last-without-newline"}, secret.Reveal(cfg.Sources[0].Secrets))
		require.Equal(t, secretsPath, cfg.Sources[0].SecretsFile)
	})

	t.Run("AloneSatisfiesTheSecretRequirement", func(t *testing.T) {
		t.Parallel()

		secretsPath := writeFile(t, "secrets", testSecret+"\n")
		path := writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: shopify
    provider: shopify
    secrets_file: `+secretsPath+`
`)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		require.Equal(t, []string{testSecret}, secret.Reveal(cfg.Sources[0].Secrets))
	})

	t.Run("OnlyCommentsMeansNoSecret", func(t *testing.T) {
		t.Parallel()

		secretsPath := writeFile(t, "secrets", "# nothing yet\n\n")
		path := writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: shopify
    provider: shopify
    secrets_file: `+secretsPath+`
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorContains(t, err, "sources[shopify]: shopify: secrets: at least one is required")
	})

	t.Run("UnreadableFileNamesTheKey", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["x"]
  - name: shopify
    provider: shopify
    secrets_file: /nonexistent/hookinbox/secrets
`)
		_, err := loadIn(path, everything, nil)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, "sources[shopify].secrets_file: open /nonexistent/hookinbox/secrets")
	})
}

func TestLoadEnvironment(t *testing.T) {
	t.Parallel()

	t.Run("OverridesScalarAbsentFromFile", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML), NeedDatabase|NeedReceiver, map[string]string{
			"HOOKINBOX_RECEIVER_LISTEN":           "0.0.0.0:8443",
			"HOOKINBOX_RECEIVER_MAX_BODY_BYTES":   "4096",
			"HOOKINBOX_RECEIVER_ACK_TIMEOUT":      "3s",
			"HOOKINBOX_WORKER_CONCURRENCY":        "7",
			"HOOKINBOX_WORKER_SOFT_STOP_TIMEOUT":  "30s",
			"HOOKINBOX_WORKER_SYNCHRONOUS_COMMIT": "true",
			"HOOKINBOX_LOG_LEVEL":                 "warn",
			"HOOKINBOX_DATABASE_MAX_CONNS":        "3",
		})
		require.NoError(t, err)
		require.Equal(t, "0.0.0.0:8443", cfg.Receiver.Listen)
		require.Equal(t, int64(4096), cfg.Receiver.MaxBodyBytes)
		require.Equal(t, 3*time.Second, cfg.Receiver.AckTimeout)
		require.Equal(t, int64(4096), cfg.Sources[0].MaxBodyBytes, "a source inherits the overridden receiver value")
		require.Equal(t, 7, cfg.Worker.Concurrency)
		require.Equal(t, 30*time.Second, cfg.Worker.SoftStopTimeout)
		require.True(t, cfg.Worker.SynchronousCommit)
		require.Equal(t, "warn", cfg.Log.Level)
		require.Equal(t, int32(3), cfg.Database.MaxConns)
		require.Empty(t, cfg.Warnings())
	})

	t.Run("OverridesFileValue", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML+`
log:
  format: json
receiver:
  ack_timeout: nonsense
`), NeedDatabase|NeedReceiver, map[string]string{"HOOKINBOX_LOG_FORMAT": "console", "HOOKINBOX_RECEIVER_ACK_TIMEOUT": "2s"})
		require.NoError(t, err, "a file value the environment overrides is not read")
		require.Equal(t, "console", cfg.Log.Format)
		require.Equal(t, 2*time.Second, cfg.Receiver.AckTimeout)
	})

	t.Run("EmptyVariableOverridesNothing", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML+`
log:
  format: console
`), NeedDatabase|NeedReceiver, map[string]string{"HOOKINBOX_LOG_FORMAT": ""})
		require.NoError(t, err)
		require.Equal(t, "console", cfg.Log.Format)
	})

	t.Run("WithoutFile", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn("", NeedDatabase, map[string]string{
			"HOOKINBOX_DATABASE_URL":  "postgres://localhost/hookinbox",
			"HOOKINBOX_WORKER_LISTEN": ":9090",
		})
		require.NoError(t, err)
		require.Equal(t, "postgres://localhost/hookinbox", cfg.Database.URL.Reveal())
		require.Equal(t, ":9090", cfg.Worker.Listen)
		require.Equal(t, "127.0.0.1:8080", cfg.Receiver.Listen)
		require.Empty(t, cfg.Sources)
	})

	t.Run("WithoutFileRequiresDatabaseURL", func(t *testing.T) {
		t.Parallel()

		_, err := loadIn("", NeedDatabase, nil)
		require.ErrorContains(t, err, "database.url: required")
		require.ErrorContains(t, err, "read from the environment (no config file)")
	})

	t.Run("PathFromEnv", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn("", NeedDatabase|NeedReceiver, map[string]string{PathEnv: writeFile(t, "hookinbox.yaml", minimalYAML)})
		require.NoError(t, err)
		require.Equal(t, "stripe", cfg.Sources[0].Name)
		require.Empty(t, cfg.Warnings(), "HOOKINBOX_CONFIG is a known variable")
	})

	t.Run("ExplicitPathBeatsPathEnv", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML), NeedDatabase|NeedReceiver,
			map[string]string{PathEnv: filepath.Join(t.TempDir(), "absent.yaml")})
		require.NoError(t, err)
		require.Equal(t, "stripe", cfg.Sources[0].Name)
	})

	t.Run("ExpandsEnvInSecrets", func(t *testing.T) {
		t.Parallel()

		secretsDir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(secretsDir, "bank"), []byte(testBankSecret+"\n"), 0o600))
		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["${STRIPE_WEBHOOK_SECRET}", "prefix-${STRIPE_WEBHOOK_SECRET_OLD}"]
  - name: bank
    provider: standardwebhooks
    secrets_file: ${SECRETS_DIR}/bank
`), NeedDatabase|NeedReceiver, map[string]string{
			"STRIPE_WEBHOOK_SECRET":     testSecret,
			"STRIPE_WEBHOOK_SECRET_OLD": "whsec_old",
			"SECRETS_DIR":               secretsDir,
		})
		require.NoError(t, err)
		require.Equal(t, []string{testSecret, "prefix-whsec_old"}, secret.Reveal(cfg.Sources[0].Secrets))
		require.Equal(t, []string{testBankSecret}, secret.Reveal(cfg.Sources[1].Secrets))
	})

	t.Run("UnsetEnvReferenceNamesKeyNotValue", func(t *testing.T) {
		t.Parallel()

		_, err := loadIn(writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["${SET_ONE}", "${STRIPE_WEBHOOK_SECRET}"]
worker:
  listen: ${WORKER_ADDR}
  routes: [{source: stripe, handlers: [log]}]
`), NeedDatabase|NeedReceiver|NeedWorker, map[string]string{"SET_ONE": testSecret})
		require.ErrorContains(t, err, "sources[stripe].secrets[1]: environment variable STRIPE_WEBHOOK_SECRET is not set")
		require.ErrorContains(t, err, "worker.listen: environment variable WORKER_ADDR is not set")
		require.NotContains(t, err.Error(), testSecret)
	})
}

// TestLoadReadsTheProcessEnvironment checks Load itself, which reads the
// process environment. It sets variables, so it is serial.
func TestLoadReadsTheProcessEnvironment(t *testing.T) {
	t.Setenv(PathEnv, writeFile(t, "hookinbox.yaml", minimalYAML))
	t.Setenv("HOOKINBOX_WORKER_CONCURRENCY", "7")
	t.Setenv("HOOKINBOX_RECEIVER_LISEN", ":1")

	cfg, err := Load("", NeedDatabase|NeedReceiver)
	require.NoError(t, err)
	require.Equal(t, "stripe", cfg.Sources[0].Name)
	require.Equal(t, 7, cfg.Worker.Concurrency)
	require.Equal(t, []string{"HOOKINBOX_RECEIVER_LISEN matches no config key, so it is ignored (did you mean HOOKINBOX_RECEIVER_LISTEN?)"}, cfg.Warnings())
}

func TestLoadDatabaseURLPrecedence(t *testing.T) {
	t.Parallel()

	const (
		fromPrefixed = "postgres://prefixed/hookinbox"
		fromFile     = "postgres://file/hookinbox"
		fromPlain    = "postgres://plain/hookinbox"
	)
	fileWith := func(t *testing.T, url string) string {
		t.Helper()
		yaml := "sources: []\n"
		if url != "" {
			yaml += "database:\n  url: " + url + "\n"
		}
		return writeFile(t, "hookinbox.yaml", yaml)
	}

	for _, tt := range []struct {
		name                  string
		prefixed, file, plain string
		want                  string
	}{
		{name: "PrefixedBeatsFileAndPlain", prefixed: fromPrefixed, file: fromFile, plain: fromPlain, want: fromPrefixed},
		{name: "PrefixedBeatsPlain", prefixed: fromPrefixed, plain: fromPlain, want: fromPrefixed},
		{name: "PrefixedBeatsFile", prefixed: fromPrefixed, file: fromFile, want: fromPrefixed},
		{name: "FileBeatsPlain", file: fromFile, plain: fromPlain, want: fromFile},
		{name: "PlainAlone", plain: fromPlain, want: fromPlain},
		{name: "FileReferencingPlain", file: "${DATABASE_URL}", plain: fromPlain, want: fromPlain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			env := map[string]string{}
			for name, value := range map[string]string{"HOOKINBOX_DATABASE_URL": tt.prefixed, databaseURLEnv: tt.plain} {
				if value != "" {
					env[name] = value
				}
			}
			cfg, err := loadIn(fileWith(t, tt.file), NeedDatabase, env)
			require.NoError(t, err)
			require.Equal(t, tt.want, cfg.Database.URL.Reveal())
		})
	}
}

func TestScalarKeys(t *testing.T) {
	t.Parallel()

	keys := scalarKeys(reflect.TypeFor[Config]())
	require.Equal(t, []string{
		"database.url", "database.max_conns", "database.pooler", "database.query_mode",
		"database.durability.keep_remote_write", "database.durability.require",
		"log.level", "log.format",
		"receiver.listen", "receiver.ops_listen", "receiver.max_body_bytes", "receiver.ack_timeout", "receiver.shutdown_delay", "receiver.shutdown_timeout",
		"receiver.batch_max_events", "receiver.batch_max_wait", "receiver.batch_flushers", "receiver.batch_queue", "receiver.retry_after", "receiver.max_in_flight",
		"receiver.source_share", "receiver.max_unverified_bytes", "receiver.max_unverified_per_client", "receiver.min_body_rate",
		"receiver.max_connections", "receiver.max_connections_per_client", "receiver.max_header_bytes",
		"receiver.rejections.disabled", "receiver.rejections.keep", "receiver.rejections.sample_burst", "receiver.rejections.sample_every",
		"worker.listen", "worker.concurrency", "worker.max_attempts", "worker.job_timeout", "worker.rescue_after",
		"worker.fetch_cooldown", "worker.fetch_poll_interval",
		"worker.reaper_interval", "worker.orphan_after", "worker.prune_interval", "worker.prune_batch",
		"worker.group_max_events", "worker.soft_stop_timeout", "worker.synchronous_commit", "worker.isolation", "worker.pause_refresh", "worker.heartbeat_interval",
		"worker.replay_rate", "worker.replay_batch", "worker.unrouted", "worker.hard_stop_timeout",
		"worker.ui.enabled", "worker.ui.read_only", "worker.admin.token",
		"worker.outbox.relay.disabled", "worker.outbox.relay.batch", "worker.outbox.relay.lease", "worker.outbox.relay.poll_interval",
		"tracing.enabled", "tracing.otlp_endpoint", "tracing.sample_ratio",
	}, keys)
	require.Equal(t, "HOOKINBOX_DATABASE_URL", envVar("database.url"))
	require.Equal(t, "HOOKINBOX_WORKER_SOFT_STOP_TIMEOUT", envVar("worker.soft_stop_timeout"))
}

// TestLoadReportsEveryProblemByItsCause checks that Load reports every
// problem of a file and its environment in one pass, each once, under the
// name the operator must fix: the key, the source's name, the variable.
func TestLoadReportsEveryProblemByItsCause(t *testing.T) {
	t.Parallel()

	const twoSources = `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["` + testSecret + `"]
  - name: bank
    provider: standardwebhooks
    secrets: ["` + testBankSecret + `"]
worker:
  routes: [{source: "*", handlers: [noop]}]
`
	for _, tt := range []struct {
		name string
		yaml string
		env  map[string]string
		// want are lines the error must have; once are substrings it must
		// have exactly once.
		want, once []string
	}{
		{
			name: "TopLevelTypoIsNamed",
			yaml: twoSources + "recever:\n  listen: 0.0.0.0:8080\n",
			want: []string{"recever: unknown key (did you mean receiver?)"},
		},
		{
			name: "TyposHideNoValueErrors",
			yaml: `
database:
  url: postgres://localhost/hookinbox
  max_con: 3
receiver:
  lisen: 0.0.0.0:8080
  ack_timeout: 4
sources:
  - name: stripe
    provider: stripe
    secrets: ["${STRIPE_WEBHOOK_SECRET}"]
    toleranse: 5m
  - name: bank
    provider: standardwebhooks
    secrets: [""]
worker:
  concurrency: -1
  routes: [{source: "*", handlers: [noop], type: ["*"]}]
`,
			want: []string{
				"database.max_con: unknown key (did you mean max_conns?)",
				"receiver.lisen: unknown key (did you mean listen?)",
				`receiver.ack_timeout: must be a duration with a unit such as "30s" or "5m", not the bare number 4`,
				"sources[stripe].toleranse: unknown key (did you mean tolerance?)",
				"worker.routes[0].type: unknown key (did you mean types?)",
				"sources[stripe].secrets[0]: environment variable STRIPE_WEBHOOK_SECRET is not set",
				"sources[bank].secrets[0]: must not be empty",
				"worker.concurrency: must be positive",
			},
		},
		{
			name: "SourceShareAboveOne",
			yaml: `
database:
  url: postgres://localhost/hookinbox
receiver:
  source_share: 1.5
sources:
  - name: stripe
    provider: stripe
    secrets: ["` + testSecret + `"]
worker:
  routes: [{source: "*", handlers: [noop]}]
`,
			want: []string{"receiver.source_share: must be more than 0 and at most 1"},
		},
		{
			name: "SourceWithoutAValidNameIsNamedByIndex",
			yaml: `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["` + testSecret + `"]
  - provider: stripe
    secrets: [""]
  - name: Bad Name
    provider: stripe
    tolerance: -1m
worker:
  routes: [{source: "*", handlers: [noop]}]
`,
			want: []string{
				"sources[1].name: required",
				"sources[1].secrets[0]: must not be empty",
				`sources[2].name: "Bad Name" must match`,
				"sources[2].tolerance: must be positive",
			},
		},
		{
			name: "UndecodableVariableIsBlamedOnceOnTheVariable",
			yaml: twoSources,
			env:  map[string]string{"HOOKINBOX_RECEIVER_ACK_TIMEOUT": "abc"},
			want: []string{`HOOKINBOX_RECEIVER_ACK_TIMEOUT (receiver.ack_timeout): "abc" is not a duration such as "30s" or "5m"`},
			once: []string{"ack_timeout"},
		},
		{
			name: "InvalidVariableIsBlamedOnceOnTheVariable",
			yaml: twoSources,
			env:  map[string]string{"HOOKINBOX_RECEIVER_ACK_TIMEOUT": "-1s", "HOOKINBOX_RECEIVER_MAX_BODY_BYTES": "0x"},
			want: []string{
				"HOOKINBOX_RECEIVER_ACK_TIMEOUT (receiver.ack_timeout): must be positive",
				"HOOKINBOX_RECEIVER_MAX_BODY_BYTES (receiver.max_body_bytes): cannot parse value as 'int64'",
			},
			once: []string{"ack_timeout", "max_body_bytes"},
		},
		{
			name: "InvalidInheritedFileValueIsReportedOnce",
			yaml: twoSources + "receiver:\n  ack_timeout: -1s\n",
			want: []string{"receiver.ack_timeout: must be positive"},
			once: []string{"ack_timeout"},
		},
		{
			name: "VariableOfAnotherSectionIsBlamedOnTheVariable",
			yaml: twoSources,
			env:  map[string]string{"HOOKINBOX_WORKER_CONCURRENCY": "lots", "HOOKINBOX_WORKER_LISTEN": "${UNSET_ADDR}"},
			want: []string{
				"HOOKINBOX_WORKER_CONCURRENCY (worker.concurrency): cannot parse value as 'int'",
				"HOOKINBOX_WORKER_LISTEN (worker.listen): environment variable UNSET_ADDR is not set",
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			path := writeFile(t, "hookinbox.yaml", tt.yaml)
			_, err := loadIn(path, everything, tt.env)
			require.Error(t, err)
			msg := err.Error()
			lines := strings.Split(msg, "\n")
			require.Equal(t, "config: invalid configuration, read from "+path+" and the environment:", lines[0])
			for _, want := range tt.want {
				require.True(t, slices.ContainsFunc(lines[1:], func(line string) bool { return strings.HasPrefix(line, want) }),
					"no line starts with %q in:\n%s", want, msg)
			}
			require.Len(t, lines, 1+len(tt.want), "exactly the problems expected:\n%s", msg)
			for _, once := range tt.once {
				require.Equal(t, 1, strings.Count(msg, once), "%q more than once in:\n%s", once, msg)
			}
			require.NotContains(t, msg, "''")
			require.NotContains(t, msg, testSecret)
		})
	}
}

func TestLoadWarnsOfUnknownVariables(t *testing.T) {
	t.Parallel()

	cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML), NeedDatabase|NeedReceiver, map[string]string{
		"HOOKINBOX_RECEIVER_LISEN":     ":1",
		"HOOKINBOX_SOURCES":            "stripe",
		"HOOKINBOX_SOMETHING_ELSE":     "x",
		"HOOKINBOX_RECEIVER_LISTEN":    "127.0.0.1:0",
		"HOOKINBOX_DATABASE_URL":       "postgres://localhost/hookinbox",
		PathEnv:                        "",
		"HOOKINBOXED":                  "not ours",
		"STRIPE_WEBHOOK_SECRET":        "not ours either",
		"HOOKINBOX_WORKER_CONCURENCY":  "3",
		"HOOKINBOX_WORKER_CONCURRENCY": "4",
	})
	require.NoError(t, err)
	require.Equal(t, []string{
		"HOOKINBOX_RECEIVER_LISEN matches no config key, so it is ignored (did you mean HOOKINBOX_RECEIVER_LISTEN?)",
		"HOOKINBOX_SOMETHING_ELSE matches no config key, so it is ignored",
		"HOOKINBOX_SOURCES matches no config key, so it is ignored (sources is a list, which comes from the config file only)",
		"HOOKINBOX_WORKER_CONCURENCY matches no config key, so it is ignored (did you mean HOOKINBOX_WORKER_CONCURRENCY?)",
	}, cfg.Warnings())

	t.Run("ABadConfigStillFailsWithoutWarnings", func(t *testing.T) {
		t.Parallel()

		_, err := loadIn("", NeedDatabase, map[string]string{"HOOKINBOX_RECEIVER_LISEN": ":1"})
		require.ErrorContains(t, err, "database.url: required")
		require.NotContains(t, err.Error(), "LISEN", "a warning is not an error")
	})
}

// TestEnvVar checks the environment variable that overrides a scalar key
// (formerly ExampleEnvVar, whose function is now unexported).
func TestEnvVar(t *testing.T) {
	t.Parallel()
	require.Equal(t, "HOOKINBOX_RECEIVER_MAX_BODY_BYTES", envVar("receiver.max_body_bytes"))
	require.Equal(t, "HOOKINBOX_WORKER_CONCURRENCY", envVar("worker.concurrency"))
}
