package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
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
			"TransactionPooler":  func(c *Config) { c.Database.Pooler, c.Database.QueryMode = PoolerTransaction, "simple_protocol" },
			"DescribeExecDirect": func(c *Config) { c.Database.QueryMode = "describe_exec" },
			"ListenIPv6":         func(c *Config) { c.Worker.Listen = "[::1]:8081" },
			"ProviderReplaced":   func(c *Config) { c.Sources[0].Provider = "shopify" },
			"UnroutedFailed":     func(c *Config) { c.Worker.Unrouted = UnroutedFailed },
			"ExactType":          func(c *Config) { c.Worker.Routes[0].Types = []string{"charge.refunded", "ping"} },
			"SourceNameWithDash": func(c *Config) { c.Sources[0].Name = "stripe-eu_2"; c.Worker.Routes[0].Source = "stripe-eu_2" },
			"QueueWithDash":      func(c *Config) { c.Sources[0].Queue = "bank-slow"; c.Worker.Queues = []string{"default", "bank-slow"} },
			"AllowIPsCIDRsAndBareAddresses": func(c *Config) {
				c.Sources[0].AllowIPs = []string{"10.0.0.0/8", "203.0.113.7", "2001:db8::/32", "2001:db8::1", "0.0.0.0/0", "::/0"}
			},
			"TrustedProxies":   func(c *Config) { c.Receiver.TrustedProxies = []string{"10.0.0.0/8", "fd00::/8", "192.0.2.10"} },
			"TwinTypesOff":     func(c *Config) { c.Sources[0].TwinTypes = []string{} },
			"TwinTypesOwnList": func(c *Config) { c.Sources[0].TwinTypes = []string{"invoice.paid", "checkout.session.completed"} },
			"RouteAfterNarrower": func(c *Config) {
				c.Worker.Routes = []worker.Route{
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
			{"PoolerUnknown", func(c *Config) { c.Database.Pooler = "statement" }, `database.pooler: must be none or transaction, not "statement"`},
			{"QueryModeUnknown", func(c *Config) { c.Database.QueryMode = "prepared" }, `database.query_mode: must be one of cache_statement, cache_describe, describe_exec, exec, simple_protocol, not "prepared"`},
			{"QueryModePreparesBehindATransactionPooler", func(c *Config) { c.Database.Pooler, c.Database.QueryMode = "transaction", "cache_statement" },
				"database.query_mode: cache_statement does not work behind a transaction pooler (database.pooler: transaction), which may run each round trip on another server connection"},
			{"QueryModeTwoRoundTripsBehindATransactionPooler", func(c *Config) { c.Database.Pooler, c.Database.QueryMode = "transaction", "describe_exec" },
				"database.query_mode: describe_exec does not work behind a transaction pooler"},
			{"QueryModeInTheURL", func(c *Config) {
				c.Database.URL = "postgres://u:" + testDatabasePassword + "@h/db?default_query_exec_mode=exec"
			},
				"database.url: sets default_query_exec_mode; set database.query_mode instead"},
			{"QueryModeInTheDSN", func(c *Config) { c.Database.URL = "host=h default_query_exec_mode=exec" },
				"database.url: sets default_query_exec_mode; set database.query_mode instead"},
			{"LogLevel", func(c *Config) { c.Log.Level = "verbose" }, `log.level: must be debug, info, warn or error, not "verbose"`},
			{"LogFormat", func(c *Config) { c.Log.Format = "xml" }, `log.format: must be json or console, not "xml"`},
			{"ReceiverListenNoPort", func(c *Config) { c.Receiver.Listen = "localhost" }, `receiver.listen: "localhost" is not host:port`},
			{"ReceiverListenBadPort", func(c *Config) { c.Receiver.Listen = "localhost:99999" }, `receiver.listen: "localhost:99999": port must be a number from 0 to 65535`},
			{"ReceiverOpsListenNoPort", func(c *Config) { c.Receiver.OpsListen = "localhost" }, `receiver.ops_listen: "localhost" is not host:port`},
			{"ReceiverOpsListenIsListen", func(c *Config) { c.Receiver.OpsListen = c.Receiver.Listen }, `receiver.ops_listen: "127.0.0.1:8080" is receiver.listen too`},
			{"ReceiverMaxBodyBytes", func(c *Config) { c.Receiver.MaxBodyBytes = -1 }, "receiver.max_body_bytes: must be positive"},
			{"ReceiverAckTimeout", func(c *Config) { c.Receiver.AckTimeout = -time.Second }, "receiver.ack_timeout: must be positive"},
			{"ReceiverRetryAfter", func(c *Config) { c.Receiver.RetryAfter = -time.Second }, "receiver.retry_after: must be positive"},
			{"ReceiverShutdownTimeout", func(c *Config) { c.Receiver.ShutdownTimeout = -time.Second }, "receiver.shutdown_timeout: must be positive"},
			{"SourceNameMissing", func(c *Config) { c.Sources[1].Name = "" }, "sources[1].name: required"},
			{"SourceNameUppercase", func(c *Config) { c.Sources[1].Name = "Bank" }, `sources[1].name: "Bank" must match ^[a-z0-9][a-z0-9_-]*$`},
			{"SourceNameLeadingDash", func(c *Config) { c.Sources[1].Name = "-bank" }, `sources[1].name: "-bank" must match`},
			{"SourceNameSlash", func(c *Config) { c.Sources[1].Name = "a/b" }, `sources[1].name: "a/b" must match`},
			{"SourceNameDuplicate", func(c *Config) { c.Sources[1].Name = "stripe" }, `sources[1].name: duplicate "stripe" (also sources[0])`},
			{"ProviderMissing", func(c *Config) { c.Sources[0].Provider = "" }, "sources[stripe].provider: required (one of " + strings.Join(provider.Names(), ", ") + ")"},
			{"ProviderUnknown", func(c *Config) { c.Sources[0].Provider = "carrier-pigeon" }, `sources[stripe].provider: unknown "carrier-pigeon" (known: ` + strings.Join(provider.Names(), ", ") + ")"},
			{"SecretsMissingPerProvider", func(c *Config) { c.Sources[0].Secrets = nil }, "sources[stripe]: stripe: secrets: at least one is required"},
			{"SecretRejectedByProvider", func(c *Config) { c.Sources[1].Secrets = []secret.String{"not-a-whsec"} }, "sources[bank]: standardwebhooks: secrets[0]"},
			{"SecretEmpty", func(c *Config) { c.Sources[0].Secrets = []secret.String{testSecret, ""} }, "sources[stripe].secrets[1]: must not be empty"},
			{"SecretBlank", func(c *Config) { c.Sources[0].Secrets = []secret.String{" \t"} }, "sources[stripe].secrets[0]: must not be empty"},
			{"SourceTolerance", func(c *Config) { c.Sources[0].Tolerance = -time.Minute }, "sources[stripe].tolerance: must be positive"},
			{"SourceMaxBodyBytes", func(c *Config) { c.Sources[0].MaxBodyBytes = -1 }, "sources[stripe].max_body_bytes: must be positive"},
			{"SourceAckTimeout", func(c *Config) { c.Sources[0].AckTimeout = -time.Second }, "sources[stripe].ack_timeout: must be positive"},
			{"AllowIPsNotAnAddress", func(c *Config) { c.Sources[0].AllowIPs = []string{"10.0.0.0/8", "stripe.com"} }, `sources[stripe].allow_ips[1]: "stripe.com" is not a CIDR prefix (10.0.0.0/8) or an IP address`},
			{"AllowIPsBadBits", func(c *Config) { c.Sources[0].AllowIPs = []string{"10.0.0.0/33"} }, `sources[stripe].allow_ips[0]: "10.0.0.0/33" is not a CIDR prefix`},
			{"AllowIPsHostBits", func(c *Config) { c.Sources[0].AllowIPs = []string{"203.0.113.7/24"} }, `sources[stripe].allow_ips[0]: "203.0.113.7/24" has host bits set; write 203.0.113.0/24 for the network, or 203.0.113.7/32 for the one host`},
			{"AllowIPsMapped", func(c *Config) { c.Sources[0].AllowIPs = []string{"::ffff:10.0.0.0/104"} }, `sources[stripe].allow_ips[0]: "::ffff:10.0.0.0/104" is IPv4-mapped IPv6, which never matches a client; write it as IPv4 (10.0.0.0/8)`},
			{"AllowIPsMappedAddress", func(c *Config) { c.Sources[0].AllowIPs = []string{"::ffff:203.0.113.7"} }, `write it as IPv4 (203.0.113.7/32)`},
			{"AllowIPsZone", func(c *Config) { c.Sources[0].AllowIPs = []string{"fe80::1%eth0"} }, `sources[stripe].allow_ips[0]: "fe80::1%eth0": an IP address with a zone cannot be matched`},
			{"AllowIPsEmptyEntry", func(c *Config) { c.Sources[0].AllowIPs = []string{""} }, `sources[stripe].allow_ips[0]: "" is not a CIDR prefix`},
			{"BasicAuthUsernameMissing", func(c *Config) { c.Sources[0].BasicAuth = []BasicAuthConfig{{Password: testSecret}} }, "sources[stripe].basic_auth[0].username: required"},
			{"BasicAuthUsernameColon", func(c *Config) { c.Sources[0].BasicAuth = []BasicAuthConfig{{Username: "a:b", Password: testSecret}} }, "sources[stripe].basic_auth[0].username: must not contain ':'"},
			{"BasicAuthPasswordEmpty", func(c *Config) {
				c.Sources[0].BasicAuth = []BasicAuthConfig{{Username: "u", Password: testSecret}, {Username: "u2", Password: " "}}
			}, "sources[stripe].basic_auth[1].password: must not be empty"},
			{"URLRelative", func(c *Config) { c.Sources[0].URL = "/webhooks/square" }, "sources[stripe].url: must be an absolute https:// or http:// URL"},
			{"URLOtherScheme", func(c *Config) { c.Sources[0].URL = "ftp://example.com/hooks" }, "sources[stripe].url: must be an absolute"},
			{"URLUnparseable", func(c *Config) { c.Sources[0].URL = "https://u:" + testSecret + "@exa mple.com/%zz" }, "sources[stripe].url: must be an absolute"},
			{"Algorithm", func(c *Config) { c.Sources[0] = hmacSource(); c.Sources[0].Algorithm = "md5" }, `sources[partner].algorithm: must be sha1, sha256 or sha512, not "md5"`},
			{"TwinTypesOnOtherProvider", func(c *Config) { c.Sources[1].TwinTypes = []string{} }, "sources[bank].twin_types: only the stripe provider has twin types"},
			{"TwinTypeEmpty", func(c *Config) { c.Sources[0].TwinTypes = []string{"invoice.paid", ""} }, "sources[stripe].twin_types[1]: must not be empty"},
			{"TwinTypePattern", func(c *Config) { c.Sources[0].TwinTypes = []string{"invoice.*"} }, `sources[stripe].twin_types[0]: "invoice.*" must be an exact event type`},
			{"TwinTypeRefundRecurs", func(c *Config) { c.Sources[0].TwinTypes = []string{"charge.refunded"} }, `sources[stripe].twin_types[0]: "charge.refunded" can happen more than once per object`},
			{"TwinTypeUpdatedRecurs", func(c *Config) { c.Sources[0].TwinTypes = []string{"customer.subscription.updated"} }, `sources[stripe].twin_types[0]: "customer.subscription.updated" can happen`},
			{"TwinTypeFailureRecurs", func(c *Config) { c.Sources[0].TwinTypes = []string{"invoice.payment_failed"} }, `sources[stripe].twin_types[0]: "invoice.payment_failed" can happen`},
			{"HMACOnOtherProvider", func(c *Config) { c.Sources[0].HMAC.APIKeys = []secret.String{testSecret} }, "sources[stripe].hmac: only the hmac provider reads hmac"},
			{"BasicAuthOnOtherProvider", func(c *Config) { c.Sources[0].BasicAuth = []BasicAuthConfig{{Username: "u", Password: testSecret}} }, "sources[stripe].basic_auth: only the marqeta, adyen and hmac providers read basic_auth"},
			{"URLOnOtherProvider", func(c *Config) { c.Sources[1].URL = "https://hooks.example.com/bank" }, "sources[bank].url: only the square and twilio providers read url"},
			{"AlgorithmOnOtherProvider", func(c *Config) { c.Sources[0].Algorithm = "sha1" }, "sources[stripe].algorithm: only the marqeta and hmac providers read algorithm"},
			{"HMACEncoding", func(c *Config) { c.Sources[0] = hmacSource(); c.Sources[0].HMAC.Encoding = "base32" }, `sources[partner].hmac.encoding: must be hex or base64, not "base32"`},
			{"HMACAPIKeysWithoutHeader", func(c *Config) { c.Sources[0] = hmacSource(); c.Sources[0].HMAC.APIKeyHeader = "" }, "sources[partner].hmac.api_key_header: required when hmac.api_keys is set"},
			{"HMACHeaderWithoutAPIKeys", func(c *Config) { c.Sources[0] = hmacSource(); c.Sources[0].HMAC.APIKeys = nil }, "sources[partner].hmac.api_keys: at least one key is required when hmac.api_key_header is set"},
			{"HMACAPIKeyEmpty", func(c *Config) {
				c.Sources[0] = hmacSource()
				c.Sources[0].HMAC.APIKeys = []secret.String{testSecret, ""}
			}, "sources[partner].hmac.api_keys[1]: must not be empty"},
			{"TrustedProxies", func(c *Config) { c.Receiver.TrustedProxies = []string{"10.0.0.0/8", "ingress"} }, `receiver.trusted_proxies[1]: "ingress" is not a CIDR prefix (10.0.0.0/8) or an IP address`},
			{"TrustedProxiesHostBits", func(c *Config) { c.Receiver.TrustedProxies = []string{"2001:db8::1/32"} }, `receiver.trusted_proxies[0]: "2001:db8::1/32" has host bits set; write 2001:db8::/32 for the network, or 2001:db8::1/128 for the one host`},
			{"SourceQueueEmpty", func(c *Config) { c.Sources[0].Queue = "" }, "sources[stripe].queue: required"},
			{"SourceQueueInvalid", func(c *Config) { c.Sources[0].Queue = "Bank Queue" }, `sources[stripe].queue: "Bank Queue" must be lowercase letters and digits separated by _ or -`},
			{"SourceQueueTooLong", func(c *Config) { c.Sources[0].Queue = strings.Repeat("q", 65) }, "sources[stripe].queue: longer than 64 characters"},
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
				c.Worker.Routes = append(c.Worker.Routes, worker.Route{Source: "bank", Types: []string{"*"}, Handlers: []string{"log"}})
			}, `worker.routes[2]: unreachable: worker.routes[1] already matches every event of source "bank"`},
			{"RouteAfterCatchAllForItsSource", func(c *Config) {
				c.Worker.Routes = []worker.Route{
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

	t.Run("ProviderRejectionIsScrubbedOfCredentials", func(t *testing.T) {
		t.Parallel()

		// A provider error that quoted a credential must not carry it on.
		s := &SourceConfig{
			Secrets:   []secret.String{testSecret},
			BasicAuth: []BasicAuthConfig{{Username: "user", Password: "pw-" + testSecret}},
			HMAC:      HMACConfig{APIKeys: []secret.String{"key-" + testSecret}},
		}
		require.Equal(t, "bad [redacted], [redacted] and [redacted] (user)",
			s.scrub("bad "+testSecret+", pw-"+testSecret+" and key-"+testSecret+" (user)"))

		s.Secrets = append(s.Secrets, "is")
		require.Equal(t, "this is fine", s.scrub("this is fine"), "too short to hide")
	})
}

// hmacSource returns an hmac source with every generic key set validly.
func hmacSource() SourceConfig {
	return SourceConfig{
		Name: "partner", Provider: "hmac", Secrets: []secret.String{testSecret},
		Tolerance: 5 * time.Minute, MaxBodyBytes: 1 << 20, AckTimeout: 4 * time.Second, Queue: "default",
		HMAC: HMACConfig{Header: "X-Signature", Encoding: "base64", APIKeyHeader: "X-Api-Key", APIKeys: []secret.String{"key-" + testSecret}},
	}
}
