// Package config loads hookinbox's configuration. Load is the only place in
// the project that touches viper; everything else receives the typed structs
// below, already defaulted, expanded and validated.
package config

import (
	"time"

	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// Config is the whole configuration of the receiver, the worker and inboxctl.
type Config struct {
	Database DatabaseConfig `mapstructure:"database"`
	Log      LogConfig      `mapstructure:"log"`
	Receiver ReceiverConfig `mapstructure:"receiver"`
	Sources  []SourceConfig `mapstructure:"sources"`
	Worker   WorkerConfig   `mapstructure:"worker"`
	// Tracing is the tracing: section: its keys, defaults and validation
	// are pkg/component's TracingConfig, which internal/tracing uses.
	Tracing component.TracingConfig `mapstructure:"tracing"`

	// warnings are Load's warnings (see Warnings).
	warnings []string
	// fileSecrets counts, by source index, the secrets Load appended from
	// the source's secrets_file (see SourceWithSecretsFile).
	fileSecrets []int
}

// DatabaseConfig says where PostgreSQL is.
type DatabaseConfig struct {
	// URL is a libpq-style connection URL. Precedence: HOOKINBOX_DATABASE_URL,
	// then database.url, then DATABASE_URL. Required.
	URL secret.URL `mapstructure:"url"`
	// MaxConns is each process's connection pool size, the most
	// connections it opens; a worker's concurrency does not change it.
	// Defaults to 16.
	MaxConns int32 `mapstructure:"max_conns"`
	// Pooler says what sits between the processes and PostgreSQL: "none"
	// (the default: a session of their own on every connection) or
	// "transaction" (a pooler that hands a server connection to a client
	// for one transaction only, such as PgBouncer's pool_mode =
	// transaction). With "transaction" the worker's River polls instead of
	// LISTENing (a LISTEN needs a session), the start-up check of
	// database.max_conns against the server's max_connections is skipped
	// (the pooler bounds the server's connections), and query_mode
	// defaults to exec. See docs/pgbouncer.md.
	Pooler string `mapstructure:"pooler"`
	// QueryMode is how pgx sends queries, one of
	// cache_statement (named prepared statements cached per connection),
	// cache_describe, describe_exec, exec or simple_protocol. Behind a
	// transaction pooler only cache_describe, exec and simple_protocol
	// work. Defaults to cache_statement, or exec when Pooler is
	// "transaction".
	QueryMode string `mapstructure:"query_mode"`
	// Durability holds what the commits a 2xx rests on wait for: its keys,
	// defaults and validation are pkg/component's DurabilityConfig, which
	// internal/inboxstore uses.
	Durability component.DurabilityConfig `mapstructure:"durability"`
}

// LogConfig configures the zap logger.
type LogConfig struct {
	// Level is debug, info, warn or error. Defaults to info.
	Level string `mapstructure:"level"`
	// Format is json or console. Defaults to json.
	Format string `mapstructure:"format"`
}

// ReceiverConfig is the receiver: section: the receiver's own settings
// (component.ServerConfig and component.BatcherConfig, whose fields sit at
// this level of the YAML) and the keys of the process around it.
type ReceiverConfig struct {
	// Listen is the HTTP address. Defaults to 127.0.0.1:8080.
	Listen string `mapstructure:"listen"`
	// OpsListen is a second HTTP address, serving only GET /healthz,
	// /readyz and /metrics, so that Listen can be public while probes and
	// scrapes keep a port of their own (the chart sets it). When it is
	// set, Listen no longer serves /metrics (it still answers /healthz and
	// /readyz, for load balancers that probe the webhook port). Defaults to
	// empty: everything on Listen.
	OpsListen string `mapstructure:"ops_listen"`
	// MaxBodyBytes is the default body limit; larger bodies get 413.
	// Defaults to 1048576 (1 MiB).
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// AckTimeout bounds the time from request to commit; past it the
	// receiver answers 503 with Retry-After. Defaults to 4s.
	AckTimeout time.Duration `mapstructure:"ack_timeout"`
	// ShutdownDelay is how long the receiver keeps serving after SIGTERM
	// with /readyz answering 503, so that load balancers and Kubernetes
	// endpoints stop sending it traffic before it stops listening. Nil
	// (left out) defaults to 5s; an explicit 0s turns the delay off.
	ShutdownDelay *time.Duration `mapstructure:"shutdown_delay"`
	// ShutdownTimeout bounds the graceful HTTP shutdown, after
	// ShutdownDelay. Defaults to 10s.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// BatcherConfig holds the group commit's settings (the batch_ keys):
	// their keys, defaults and validation are pkg/component's, which
	// internal/inboxstore's Batcher uses.
	component.BatcherConfig `mapstructure:",squash"`
	// ServerConfig holds the receiver's own settings, its connection
	// limits and trusted_proxies included: their keys are pkg/component's,
	// their defaults and validation internal/receiver's (receiver.Config).
	component.ServerConfig `mapstructure:",squash"`
	// Rejections configures the per-source rejection samples (see ops.go).
	Rejections RejectionsConfig `mapstructure:"rejections"`
}

// SourceConfig is one webhook endpoint, served at POST /webhooks/<name>.
type SourceConfig struct {
	// Name identifies the source in URLs and in the inbox. Required, unique,
	// [a-z0-9_-]+.
	Name string `mapstructure:"name"`
	// Provider names the delivery contract, one of provider.Names() (stripe,
	// shopify, standardwebhooks, svix, github, square, paddle, slack,
	// marqeta, adyen, twilio, hmac). Required.
	Provider string `mapstructure:"provider"`
	// Secrets are the signing secrets, any one of which may match (adyen:
	// hex-encoded HMAC keys; twilio: auth tokens). Values may reference the
	// environment as ${NAME}. Which providers require one is up to the
	// provider (marqeta's HMAC is optional); none may be empty.
	Secrets []secret.String `mapstructure:"secrets"`
	// SecretsFile names a file with one secret per line (blank lines and
	// lines starting with # are skipped); its secrets are appended to Secrets.
	// The receiver re-reads it while it runs and swaps in the new secrets
	// within seconds of a change, so a secret rotates without a restart (a
	// ${NAME} in Secrets cannot: the environment is read once). A changed
	// file with no secret, or one the provider refuses, keeps the old ones.
	SecretsFile string `mapstructure:"secrets_file"`
	// Tolerance bounds signed timestamps in both directions. Defaults to 5m.
	Tolerance time.Duration `mapstructure:"tolerance"`
	// MaxBodyBytes is this source's body limit. Defaults to the provider's
	// preset when it has one (github: 25 MiB), else receiver.max_body_bytes.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// AckTimeout is this source's request-to-commit budget. Defaults to the
	// provider's preset when it has one (slack: under Slack's 3s), else
	// receiver.ack_timeout.
	AckTimeout time.Duration `mapstructure:"ack_timeout"`
	// Queue is the River queue this source's jobs go to. Defaults to "default".
	Queue string `mapstructure:"queue"`
	// BasicAuth lists accepted HTTP Basic credentials; any one may match,
	// and a request must carry one on top of a valid signature. Required by
	// marqeta and adyen, optional for hmac. Defaults to none.
	BasicAuth []BasicAuthConfig `mapstructure:"basic_auth"`
	// URL is the notification URL exactly as registered at the provider,
	// which square and twilio sign; matched byte for byte, never rebuilt
	// from the request. Must be an absolute http:// or https:// URL.
	URL secret.URL `mapstructure:"url"`
	// Algorithm picks the HMAC hash where the provider lets you choose:
	// marqeta (sha1 or sha256, default sha256) and hmac (sha1, sha256 or
	// sha512, default sha256). Empty means the provider's default.
	Algorithm string `mapstructure:"algorithm"`
	// TwinTypes (stripe only) lists the event types that happen once per
	// object, deduplicated a second time on (type, data.object.id). Unset
	// means provider.DefaultStripeTwinTypes; an empty list turns twin keys
	// off. Entries are exact types; a type that can recur for one object
	// (charge.refunded, *.updated, *.payment_failed) is refused, since a
	// second occurrence would be dropped as a twin.
	TwinTypes []string `mapstructure:"twin_types"`
	// AllowIPs, when set, restricts deliveries to these networks; others get
	// 403. Each entry is a CIDR prefix with no host bits set ("10.0.0.0/8",
	// "2001:db8::/32") or a bare IP address meaning that host alone
	// ("203.0.113.7" is 203.0.113.7/32). IPv4 is written as IPv4, not as
	// IPv4-mapped IPv6. Behind a reverse proxy, see receiver.trusted_proxies.
	// Defaults to none: any address may deliver.
	AllowIPs []string `mapstructure:"allow_ips"`
	// HMAC configures the generic hmac provider; other providers refuse it.
	HMAC HMACConfig `mapstructure:"hmac"`

	// Retention is how long a done row is kept after it was received; the
	// worker's retention job then deletes it. Failed rows are never
	// deleted. Must be at least the provider's redelivery window
	// (provider.RedeliveryWindow: stripe and adyen 720h, marqeta 408h, …),
	// or a late redelivery would be processed twice. Defaults to 720h (30
	// days), or the provider's window when that is longer.
	Retention time.Duration `mapstructure:"retention"`
	// PayloadRetention, when set, is how long a done row keeps its raw
	// body, headers and payload; they are then erased and the row keeps
	// only its keys (so that a redelivery is still a duplicate) until
	// Retention. Must be shorter than Retention. Defaults to 0: payloads
	// live as long as their rows.
	PayloadRetention time.Duration `mapstructure:"payload_retention"`
	// Reconcile configures the source's reconciliation (see ops.go).
	Reconcile component.ReconcileConfig `mapstructure:"reconcile"`
}

// BasicAuthConfig is one accepted pair of HTTP Basic credentials. Both are
// required; Redacted never shows the password.
type BasicAuthConfig struct {
	// Username is compared byte for byte; it cannot contain ':'.
	Username string `mapstructure:"username"`
	// Password is compared byte for byte. Reference the environment
	// ("${MARQETA_WEBHOOK_PASSWORD}") rather than writing it in the file.
	Password secret.String `mapstructure:"password"`
}

// HMACConfig configures the generic hmac provider.
type HMACConfig struct {
	// Header carries the signature. Required for provider hmac.
	Header string `mapstructure:"header"`
	// Prefix is stripped from the header value first ("sha256=").
	Prefix string `mapstructure:"prefix"`
	// Encoding of the signature: hex or base64. Defaults to hex.
	Encoding string `mapstructure:"encoding"`
	// Template is the signed content instead of the raw body, with {body},
	// {timestamp} and {id} replaced ("{timestamp}.{body}").
	Template string `mapstructure:"template"`
	// TimestampHeader carries the unix timestamp {timestamp} stands for;
	// the source's tolerance applies to it.
	TimestampHeader string `mapstructure:"timestamp_header"`
	// IDHeader names the header that gives the event id.
	IDHeader string `mapstructure:"id_header"`
	// IDPath is a dotted JSON path ("data.id") that gives the event id when
	// IDHeader is not used.
	IDPath string `mapstructure:"id_path"`
	// TypeHeader names the header that gives the event type.
	TypeHeader string `mapstructure:"type_header"`
	// TypePath is a dotted JSON path that gives the event type when
	// TypeHeader is not used.
	TypePath string `mapstructure:"type_path"`
	// APIKeyHeader, when set, must carry one of APIKeys, on top of the
	// signature. Set both or neither.
	APIKeyHeader string `mapstructure:"api_key_header"`
	// APIKeys are the accepted API keys, any one of which may match; none
	// may be empty. Redacted shows only their count.
	APIKeys []secret.String `mapstructure:"api_keys"`
	// ChallengePath makes a verified delivery with a string at this JSON
	// path a handshake that is echoed back and never stored.
	ChallengePath string `mapstructure:"challenge_path"`
}

// WorkerConfig is the worker: section: the worker's own settings
// (worker.Config, whose tagged fields sit at this level of the YAML) and the
// keys of the process around it.
type WorkerConfig struct {
	// Listen is the address of /healthz, /readyz and /metrics.
	// Defaults to 127.0.0.1:8081.
	Listen string `mapstructure:"listen"`
	// Concurrency is the number of jobs worked at once per queue: River's
	// jobs in flight, which hold no connection of their own. Defaults to
	// 1000.
	Concurrency int `mapstructure:"concurrency"`
	// Queues are the River queues this worker works. Defaults to ["default"].
	Queues []string `mapstructure:"queues"`
	// Config holds the worker's own settings, its routes included: their
	// keys, defaults and validation are pkg/worker's.
	worker.Config `mapstructure:",squash"`
	// Pace holds the bulk replays' default pace (replay_rate,
	// replay_batch): its keys, defaults and validation are pkg/component's,
	// which internal/replay uses.
	component.Pace `mapstructure:",squash"`
	// Unrouted decides what happens to an event no route matches: "failed"
	// (the default: it fails loudly, and can be replayed once the routes
	// are fixed) or "done" (marked done with a note, and never run).
	Unrouted string `mapstructure:"unrouted"`
	// HardStopTimeout is how long a stopping worker, once soft_stop_timeout
	// is spent and running jobs are cancelled, waits for them to return.
	// Defaults to 5s.
	HardStopTimeout time.Duration `mapstructure:"hard_stop_timeout"`
	// UI serves River UI at /riverui/ on Listen.
	UI WorkerUIConfig `mapstructure:"ui"`
	// Admin configures the admin HTTP API (see ops.go).
	Admin WorkerAdminConfig `mapstructure:"admin"`
	// Outbox configures the outbox relay run in the worker (outbox.go).
	Outbox OutboxConfig `mapstructure:"outbox"`
	// Destinations are where the forward handler, and handlers calling
	// outbox.Enqueue, send messages, by name (outbox.go). Defaults to none.
	Destinations map[string]DestinationConfig `mapstructure:"destinations"`
}

// WorkerUIConfig configures River UI, served by the worker at /riverui/ on
// worker.listen behind HTTP Basic Auth. /healthz, /readyz and /metrics stay
// unauthenticated.
type WorkerUIConfig struct {
	// Enabled serves River UI. It requires BasicAuth: the UI is never open.
	// Defaults to false.
	Enabled bool `mapstructure:"enabled"`
	// ReadOnly refuses River UI's mutating API calls (retry, cancel, delete,
	// pausing queues) with 403, for teams that want to look but not touch.
	// Defaults to false.
	ReadOnly bool `mapstructure:"read_only"`
	// BasicAuth lists the accepted credentials; any one may match, compared
	// in constant time. Reference the password from the environment
	// ("${RIVERUI_PASSWORD}"). Required when Enabled.
	BasicAuth []BasicAuthConfig `mapstructure:"basic_auth"`
}

// Secret is secret.String, the type of every secret-valued setting: it
// prints as "redacted" wherever it is printed, and Reveal gives its value.
type Secret = secret.String

// SecretURL is secret.URL, the type of a URL setting that may carry a
// password (database.url, a source's url): it prints with the password as
// "xxxxx".
type SecretURL = secret.URL
