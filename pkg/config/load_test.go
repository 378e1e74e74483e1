package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/provider"
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
		cfg, err := Load(path)
		require.NoError(t, err)

		require.Equal(t, "debug", cfg.Log.Level)
		require.Equal(t, "console", cfg.Log.Format)
		require.Equal(t, "0.0.0.0:9000", cfg.Receiver.Listen)
		require.Equal(t, int64(2048), cfg.Receiver.MaxBodyBytes)
		require.Equal(t, 2*time.Second, cfg.Receiver.AckTimeout)
		require.Equal(t, []SourceConfig{{
			Name:         "stripe",
			Provider:     "stripe",
			Secrets:      []string{testSecret},
			Tolerance:    5 * time.Minute,
			MaxBodyBytes: 2048,            // Inherited from receiver.
			AckTimeout:   2 * time.Second, // Inherited from receiver.
			Queue:        "default",
		}}, cfg.Sources)
		require.Equal(t, 4, cfg.Worker.Concurrency)
		require.Equal(t, []string{"default", "bank"}, cfg.Worker.Queues)
		require.Equal(t, 5*time.Minute, cfg.Worker.JobTimeout)
		require.Equal(t, 5*time.Minute+30*time.Second, cfg.Worker.RescueAfter)
		require.Equal(t, []RouteConfig{{
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
		cfg, err := Load(path)
		require.NoError(t, err)

		require.Equal(t, &Config{
			Database: DatabaseConfig{
				URL:      "postgres://hookinbox:" + testDatabasePassword + "@localhost:5432/hookinbox",
				MaxConns: 16,
			},
			Log: LogConfig{Level: "info", Format: "json"},
			Receiver: ReceiverConfig{
				Listen:          "127.0.0.1:8080",
				MaxBodyBytes:    1048576,
				AckTimeout:      4 * time.Second,
				RetryAfter:      5 * time.Second,
				ShutdownTimeout: 10 * time.Second,
				BatchMaxEvents:  256, BatchFlushers: 4, BatchQueue: 1024, MaxInFlight: 1024,
			},
			Sources: []SourceConfig{{
				Name:         "stripe",
				Provider:     "stripe",
				Secrets:      []string{testSecret},
				Tolerance:    5 * time.Minute,
				MaxBodyBytes: 1048576,
				AckTimeout:   4 * time.Second,
				Queue:        "default",
			}},
			Worker: WorkerConfig{
				Listen:            "127.0.0.1:8081",
				Concurrency:       32,
				Queues:            []string{"default"},
				MaxAttempts:       10,
				JobTimeout:        time.Minute,
				RescueAfter:       90 * time.Second,
				FetchCooldown:     10 * time.Millisecond,
				FetchPollInterval: time.Second,
				ReaperInterval:    time.Minute,
				OrphanAfter:       5 * time.Minute,
				Unrouted:          "done",
				SoftStopTimeout:   20 * time.Second,
				HardStopTimeout:   5 * time.Second,
				Routes:            []RouteConfig{{Source: "*", Types: []string{"*"}, Handlers: []string{"noop"}}},
			},
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
		cfg, err := Load(path)
		require.NoError(t, err)
		require.Equal(t, 1500*time.Millisecond, cfg.Receiver.AckTimeout)
		require.Equal(t, 90*time.Second, cfg.Receiver.ShutdownTimeout)
		require.Equal(t, 2*time.Hour, cfg.Worker.OrphanAfter)
	})

	t.Run("RejectsDurationWithoutUnit", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
receiver:
  ack_timeout: 4
`)
		_, err := Load(path)
		require.ErrorContains(t, err, "receiver.ack_timeout")
		require.ErrorContains(t, err, "must be a duration with a unit")
	})

	t.Run("RejectsMalformedDuration", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
worker:
  job_timeout: soon
`)
		_, err := Load(path)
		require.ErrorContains(t, err, "worker.job_timeout")
	})

	t.Run("RejectsUnknownKey", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
receiver:
  max_body_byte: 10
`)
		_, err := Load(path)
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
		_, err := Load(path)
		require.ErrorContains(t, err, "sources[0]")
		require.ErrorContains(t, err, "secret")
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
		_, err := Load(path)
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
		cfg, err := Load(path)
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
		cfg, err := Load(path)
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
			APIKeyHeader: "X-Api-Key", APIKeys: []string{"key-" + testSecret}, ChallengePath: "challenge",
		}, partner.HMAC)
	})

	t.Run("MissingFileIsAnError", func(t *testing.T) {
		t.Parallel()

		path := filepath.Join(t.TempDir(), "absent.yaml")
		_, err := Load(path)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, path)
	})

	t.Run("InvalidYAMLIsAnError", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "hookinbox.yaml", "database: [unclosed\n")
		_, err := Load(path)
		require.ErrorContains(t, err, path)
	})

	t.Run("FileWithoutYAMLExtensionIsReadAsYAML", func(t *testing.T) {
		t.Parallel()

		path := writeFile(t, "config", minimalYAML)
		cfg, err := Load(path)
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
		_, err := Load(path)
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
		cfg, err := Load(path)
		require.NoError(t, err)
		require.Equal(t, []string{"a$b", "$HOME", "$", "${", "$${x"}, cfg.Sources[0].Secrets)
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
		cfg, err := Load(path)
		require.NoError(t, err)
		require.Equal(t, []string{"inline", "new-secret", "old-secret", "last-without-newline"}, cfg.Sources[0].Secrets)
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
		cfg, err := Load(path)
		require.NoError(t, err)
		require.Equal(t, []string{testSecret}, cfg.Sources[0].Secrets)
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
		_, err := Load(path)
		require.ErrorContains(t, err, "sources[0]: shopify: secrets: at least one is required")
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
		_, err := Load(path)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, "sources[1].secrets_file: open /nonexistent/hookinbox/secrets")
	})
}

// The tests below set environment variables, so they cannot be parallel.

func TestLoadEnvOverridesScalarAbsentFromFile(t *testing.T) {
	t.Setenv("HOOKINBOX_RECEIVER_LISTEN", "0.0.0.0:8443")
	t.Setenv("HOOKINBOX_RECEIVER_MAX_BODY_BYTES", "4096")
	t.Setenv("HOOKINBOX_RECEIVER_ACK_TIMEOUT", "3s")
	t.Setenv("HOOKINBOX_WORKER_CONCURRENCY", "7")
	t.Setenv("HOOKINBOX_WORKER_SOFT_STOP_TIMEOUT", "30s")
	t.Setenv("HOOKINBOX_LOG_LEVEL", "warn")
	t.Setenv("HOOKINBOX_DATABASE_MAX_CONNS", "3")

	cfg, err := Load(writeFile(t, "hookinbox.yaml", minimalYAML))
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:8443", cfg.Receiver.Listen)
	require.Equal(t, int64(4096), cfg.Receiver.MaxBodyBytes)
	require.Equal(t, 3*time.Second, cfg.Receiver.AckTimeout)
	require.Equal(t, int64(4096), cfg.Sources[0].MaxBodyBytes, "a source inherits the overridden receiver value")
	require.Equal(t, 7, cfg.Worker.Concurrency)
	require.Equal(t, 30*time.Second, cfg.Worker.SoftStopTimeout)
	require.Equal(t, "warn", cfg.Log.Level)
	require.Equal(t, int32(3), cfg.Database.MaxConns)
}

func TestLoadEnvOverridesFileValue(t *testing.T) {
	t.Setenv("HOOKINBOX_LOG_FORMAT", "console")

	cfg, err := Load(writeFile(t, "hookinbox.yaml", minimalYAML+`
log:
  format: json
`))
	require.NoError(t, err)
	require.Equal(t, "console", cfg.Log.Format)
}

func TestLoadEnvOverrideIsValidated(t *testing.T) {
	t.Setenv("HOOKINBOX_WORKER_CONCURRENCY", "lots")

	_, err := Load(writeFile(t, "hookinbox.yaml", minimalYAML))
	require.ErrorContains(t, err, "worker.concurrency")
}

func TestLoadWithoutFile(t *testing.T) {
	t.Setenv("HOOKINBOX_DATABASE_URL", "postgres://localhost/hookinbox")
	t.Setenv("HOOKINBOX_WORKER_LISTEN", ":9090")

	cfg, err := Load("")
	require.NoError(t, err)
	require.Equal(t, "postgres://localhost/hookinbox", cfg.Database.URL)
	require.Equal(t, ":9090", cfg.Worker.Listen)
	require.Equal(t, "127.0.0.1:8080", cfg.Receiver.Listen)
	require.Empty(t, cfg.Sources)
}

func TestLoadWithoutFileRequiresDatabaseURL(t *testing.T) {
	_, err := Load("")
	require.ErrorContains(t, err, "database.url: required")
}

func TestLoadPathFromEnv(t *testing.T) {
	t.Setenv(PathEnv, writeFile(t, "hookinbox.yaml", minimalYAML))

	cfg, err := Load("")
	require.NoError(t, err)
	require.Equal(t, "stripe", cfg.Sources[0].Name)
}

func TestLoadExplicitPathBeatsPathEnv(t *testing.T) {
	t.Setenv(PathEnv, filepath.Join(t.TempDir(), "absent.yaml"))

	cfg, err := Load(writeFile(t, "hookinbox.yaml", minimalYAML))
	require.NoError(t, err)
	require.Equal(t, "stripe", cfg.Sources[0].Name)
}

func TestLoadExpandsEnvInSecrets(t *testing.T) {
	t.Setenv("STRIPE_WEBHOOK_SECRET", testSecret)
	t.Setenv("STRIPE_WEBHOOK_SECRET_OLD", "whsec_old")
	t.Setenv("SECRETS_DIR", t.TempDir())
	require.NoError(t, os.WriteFile(filepath.Join(os.Getenv("SECRETS_DIR"), "bank"), []byte(testBankSecret+"\n"), 0o600))

	cfg, err := Load(writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["${STRIPE_WEBHOOK_SECRET}", "prefix-${STRIPE_WEBHOOK_SECRET_OLD}"]
  - name: bank
    provider: standardwebhooks
    secrets_file: ${SECRETS_DIR}/bank
`))
	require.NoError(t, err)
	require.Equal(t, []string{testSecret, "prefix-whsec_old"}, cfg.Sources[0].Secrets)
	require.Equal(t, []string{testBankSecret}, cfg.Sources[1].Secrets)
}

func TestLoadUnsetEnvReferenceNamesKeyNotValue(t *testing.T) {
	t.Setenv("SET_ONE", testSecret)

	_, err := Load(writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["${SET_ONE}", "${STRIPE_WEBHOOK_SECRET}"]
worker:
  listen: ${WORKER_ADDR}
`))
	require.ErrorContains(t, err, "sources[0].secrets[1]: environment variable STRIPE_WEBHOOK_SECRET is not set")
	require.ErrorContains(t, err, "worker.listen: environment variable WORKER_ADDR is not set")
	require.NotContains(t, err.Error(), testSecret)
}

func TestLoadDatabaseURLPrecedence(t *testing.T) {
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
			for name, value := range map[string]string{"HOOKINBOX_DATABASE_URL": tt.prefixed, DatabaseURLEnv: tt.plain} {
				if value != "" {
					t.Setenv(name, value)
				}
			}
			cfg, err := Load(fileWith(t, tt.file))
			require.NoError(t, err)
			require.Equal(t, tt.want, cfg.Database.URL)
		})
	}
}

func TestScalarKeys(t *testing.T) {
	t.Parallel()

	keys := scalarKeys(reflect.TypeFor[Config](), "")
	require.Equal(t, []string{
		"database.url", "database.max_conns",
		"log.level", "log.format",
		"receiver.listen", "receiver.max_body_bytes", "receiver.ack_timeout", "receiver.retry_after", "receiver.shutdown_timeout",
		"receiver.batch_max_events", "receiver.batch_max_wait", "receiver.batch_flushers", "receiver.batch_queue", "receiver.max_in_flight",
		"worker.listen", "worker.concurrency", "worker.max_attempts", "worker.job_timeout", "worker.rescue_after",
		"worker.fetch_cooldown", "worker.fetch_poll_interval",
		"worker.reaper_interval", "worker.orphan_after", "worker.unrouted", "worker.soft_stop_timeout", "worker.hard_stop_timeout", "worker.synchronous_commit",
	}, keys)
	require.Equal(t, "HOOKINBOX_DATABASE_URL", EnvVar("database.url"))
	require.Equal(t, "HOOKINBOX_WORKER_SOFT_STOP_TIMEOUT", EnvVar("worker.soft_stop_timeout"))
}
