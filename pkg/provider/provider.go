package provider

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// Sentinel errors returned by Verify. Every one of them means "not
// authentic": the receiver answers 401 and writes nothing.
var (
	// ErrSignatureMissing is returned when a header the scheme needs is absent.
	ErrSignatureMissing = errors.New("signature header missing")
	// ErrSignatureInvalid is returned when no signature matches any secret.
	ErrSignatureInvalid = errors.New("signature invalid")
	// ErrTimestampOutsideTolerance is returned when a signed timestamp is
	// older or newer than the source's tolerance allows.
	ErrTimestampOutsideTolerance = errors.New("timestamp outside tolerance")
)

// Event is one event carried by an authentic delivery.
type Event struct {
	// ID is the provider's deduplication key for the event. It is empty when
	// the delivery is authentic but carries no usable id; the inbox then
	// derives one from the body's SHA-256.
	ID string
	// Type is the provider's event type ("payment_intent.succeeded"). It may
	// be empty for an unparseable event.
	Type string
	// Payload is the event's JSON document. It is nil when ParseError is set.
	Payload []byte
	// ParseError is set when the delivery is authentic but the event cannot
	// be stored as JSON (not JSON, no event id, a NUL that jsonb refuses).
	// Such an event is recorded as failed with this reason, never dropped.
	ParseError error
	// TwinKey is a second, logical identity of the event, unique per source
	// like ID, for providers that may send one logical event under two ids
	// (Stripe: "<type>:<data.object.id>" for once-per-object types; Shopify:
	// shop domain, X-Shopify-Event-Id and topic). Empty when the provider has
	// none or the event does not qualify.
	TwinKey string
}

// Delivery is what Verify returns for an authentic request.
type Delivery struct {
	// Events holds the delivery's events; a non-batching provider has one.
	Events []Event
	// Headers are the request headers that matter for re-verification and
	// audit (signature, timestamp, ids, topic), with canonical names.
	Headers map[string]string
	// Reply, when set, answers a handshake or health check (Slack's
	// url_verification, Marqeta's pings, a challenge echo): the receiver
	// sends it as is and stores nothing. Events is then empty.
	Reply *Reply
}

// Reply is an HTTP answer a provider's contract dictates.
type Reply struct {
	// Status is the HTTP status code.
	Status int
	// ContentType is the Content-Type header; empty for none.
	ContentType string
	// Body is sent as is.
	Body []byte
}

// Acknowledger is implemented by verifiers whose provider expects a
// particular success answer (Adyen's "[accepted]"). Others get
// 200 {"new":…,"duplicates":…,"twins":…}.
type Acknowledger interface {
	// Ack returns the answer to a committed delivery, given what the inbox
	// committed for it.
	Ack(counts inbox.ClaimCounts) Reply
}

// Preset holds a provider's defaults for what the receiver enforces around
// Verify; a source's own settings override them.
type Preset struct {
	// MaxBodyBytes is the body limit; 0 means the receiver's default.
	MaxBodyBytes int64
	// AckTimeout is the request-to-commit budget; 0 means the receiver's.
	AckTimeout time.Duration
}

// Verifier authenticates a delivery and splits it into events.
type Verifier interface {
	// Verify checks the signature over the raw body and returns the
	// delivery's events. An error wrapping one of the sentinels above means
	// the request is not authentic.
	Verify(body []byte, header http.Header) (*Delivery, error)
}

// Config configures a Verifier. Which fields a provider needs is said in the
// README's providers table and on its verifier type in the provider's file
// (stripe.go), and New names a missing one. Every list holds alternatives,
// any one of which may match, so that credentials rotate without losing
// deliveries.
type Config struct {
	// Secrets are the signing secrets (Adyen: hex-encoded HMAC keys).
	// Required by every provider except marqeta, where HMAC is optional.
	Secrets []string
	// Tolerance bounds how far a signed timestamp may be from now, in both
	// directions. Only used by timestamped schemes. Defaults to 5 minutes.
	Tolerance time.Duration
	// Now returns the current time. Defaults to time.Now; tests pin it.
	Now func() time.Time
	// BasicAuth lists accepted HTTP Basic credentials. When non-empty, a
	// request must carry one of them as well as a valid signature. Required
	// by marqeta and adyen; optional for hmac.
	BasicAuth []BasicAuth
	// URL is the notification URL exactly as configured at the provider,
	// which square and twilio sign together with the body. It is matched byte
	// for byte, never rebuilt from the request.
	URL string
	// Algorithm selects the HMAC hash where a provider lets you choose:
	// marqeta ("sha1" or "sha256") and hmac ("sha1", "sha256", "sha512").
	Algorithm string
	// TwinTypes lists the event types that happen once per object, for which
	// stripe derives a twin key. Nil means DefaultStripeTwinTypes; empty
	// turns twin keys off.
	TwinTypes []string
	// HMAC configures the generic hmac provider.
	HMAC *HMACConfig

	// signaturesOnly is set by Reverify: the verifier checks the
	// signatures only, not the connection's credentials (Basic Auth),
	// which are never stored.
	signaturesOnly bool
}

// BasicAuth is one accepted pair of HTTP Basic credentials.
type BasicAuth struct {
	Username string
	Password string
}

// HMACConfig configures the generic "hmac" provider. Every field is
// documented with its default in hmac.go.
type HMACConfig struct {
	// Header carries the signature ("X-Signature"). Required.
	Header string
	// Prefix is stripped from the header value before decoding ("sha256=").
	Prefix string
	// Encoding of the signature: "hex" (default) or "base64".
	Encoding string
	// Template, when set, is the signed content instead of the raw body,
	// with {body}, {timestamp} and {id} replaced ("{timestamp}.{body}").
	Template string
	// TimestampHeader carries the signed unix timestamp that Template's
	// {timestamp} stands for; Config.Tolerance applies to it.
	TimestampHeader string
	// IDHeader or IDPath (a dotted JSON path, "data.id") give the event id.
	IDHeader, IDPath string
	// TypeHeader or TypePath give the event type.
	TypeHeader, TypePath string
	// APIKeyHeader, when set, must carry one of APIKeys.
	APIKeyHeader string
	// APIKeys are the accepted API keys.
	APIKeys []string
	// ChallengePath, when set, makes a verified delivery whose JSON has a
	// string at this path a handshake: the receiver echoes it back and
	// stores nothing (for example "challenge").
	ChallengePath string
}

// DefaultTolerance is the default timestamp tolerance of timestamped schemes.
const DefaultTolerance = 5 * time.Minute

func (c *Config) withDefaults() *Config {
	out := *c
	if out.Tolerance == 0 {
		out.Tolerance = DefaultTolerance
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return &out
}

func (c *Config) validate() error {
	if c == nil {
		return errors.New("config is required")
	}
	for i, s := range c.Secrets {
		if s == "" {
			return fmt.Errorf("secrets[%d]: must not be empty", i)
		}
	}
	if c.Tolerance < 0 {
		return errors.New("tolerance: must not be negative")
	}
	// An empty username or password would let in whoever sends empty Basic
	// Auth credentials.
	for i, cred := range c.BasicAuth {
		if cred.Username == "" || cred.Password == "" {
			return fmt.Errorf("basic_auth[%d] needs a username and a password", i)
		}
	}
	return nil
}

// requireSecrets is the check of every provider that signs with Secrets. A
// nil config is validate's to report.
func (c *Config) requireSecrets() error {
	if c != nil && len(c.Secrets) == 0 {
		return errors.New("secrets: at least one is required")
	}
	return nil
}

var (
	constructors = map[string]func(*Config) (Verifier, error){}
	presets      = map[string]Preset{}
)

// register adds a provider's constructor and preset under its config name.
// It is called from each provider file's init.
func register(name string, newFn func(*Config) (Verifier, error), preset Preset) {
	constructors[name] = newFn
	presets[name] = preset
}

// PresetFor returns the named provider's defaults, and false for an unknown
// provider.
func PresetFor(name string) (Preset, bool) {
	p, ok := presets[name]
	return p, ok
}

// Names lists the registered provider names, sorted.
func Names() []string {
	names := make([]string, 0, len(constructors))
	for name := range constructors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// New returns the Verifier for the named provider, one of Names(). Its
// errors name the config key at fault.
func New(name string, config *Config) (Verifier, error) {
	newFn, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %v)", name, Names())
	}
	if err := config.validate(); err != nil {
		return nil, fmt.Errorf("provider %s: %w", name, err)
	}
	return newFn(config.withDefaults())
}

// adapt turns a provider's typed constructor into a registry constructor,
// returning a nil Verifier (not a typed nil pointer) on error.
func adapt[V Verifier](newFn func(*Config) (V, error)) func(*Config) (Verifier, error) {
	return func(config *Config) (Verifier, error) {
		verifier, err := newFn(config)
		if err != nil {
			return nil, err
		}
		return verifier, nil
	}
}
