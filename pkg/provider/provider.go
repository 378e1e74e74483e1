package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
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
	// the delivery is authentic but carries no usable id; the receiver then
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
}

// Delivery is what Verify returns for an authentic request.
type Delivery struct {
	// Events holds the delivery's events; a non-batching provider has one.
	Events []Event
	// Headers are the request headers that matter for re-verification and
	// audit (signature, timestamp, ids, topic), with canonical names.
	Headers map[string]string
}

// Verifier authenticates a delivery and splits it into events.
type Verifier interface {
	// Verify checks the signature over the raw body and returns the
	// delivery's events. An error wrapping one of the sentinels above means
	// the request is not authentic.
	Verify(body []byte, header http.Header) (*Delivery, error)
}

// Config configures a Verifier.
type Config struct {
	// Secrets are the signing secrets; any one of them may match, so that a
	// secret can be rotated without losing deliveries. At least one.
	Secrets []string
	// Tolerance bounds how far a signed timestamp may be from now, in both
	// directions. Only used by timestamped schemes. Defaults to 5 minutes.
	Tolerance time.Duration
	// Now returns the current time. Defaults to time.Now; tests pin it.
	Now func() time.Time
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
	if len(c.Secrets) == 0 {
		return errors.New("at least one secret is required")
	}
	for i, s := range c.Secrets {
		if s == "" {
			return fmt.Errorf("secret %d is empty", i)
		}
	}
	if c.Tolerance < 0 {
		return errors.New("tolerance must not be negative")
	}
	return nil
}

var constructors = map[string]func(*Config) (Verifier, error){}

// register adds a provider's constructor under its config name. It is called
// from each provider file's init.
func register(name string, newFn func(*Config) (Verifier, error)) {
	constructors[name] = newFn
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

// New returns the Verifier for the named provider ("stripe", "shopify",
// "standardwebhooks").
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

// hmacSHA256 returns the HMAC-SHA256 of the concatenated parts.
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, key)
	for _, part := range parts {
		mac.Write(part)
	}
	return mac.Sum(nil)
}

// errTimestampMalformed is returned for a timestamp parseUnix refuses.
var errTimestampMalformed = fmt.Errorf("timestamp is not canonical unix seconds: %w", ErrSignatureInvalid)

// parseUnix parses a signed timestamp in unix seconds. Only the canonical
// decimal form is accepted (no sign, no leading zero, no spaces), so the
// string that was signed and the instant that is checked cannot disagree.
func parseUnix(s string) (time.Time, error) {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return time.Time{}, errTimestampMalformed
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, errTimestampMalformed
		}
	}
	secs, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, errTimestampMalformed
	}
	return time.Unix(secs, 0), nil
}

// checkTimestamp returns an error wrapping ErrTimestampOutsideTolerance when
// signedAt is more than tolerance before or after now.
func checkTimestamp(now, signedAt time.Time, tolerance time.Duration) error {
	age := now.Sub(signedAt)
	if age > tolerance || age < -tolerance {
		return fmt.Errorf("timestamp %d differs from now by %s, tolerance %s: %w",
			signedAt.Unix(), age.Abs(), tolerance, ErrTimestampOutsideTolerance)
	}
	return nil
}

// auditHeaders returns the named headers that are present, keyed by their
// canonical names.
func auditHeaders(header http.Header, names ...string) map[string]string {
	kept := make(map[string]string, len(names))
	for _, name := range names {
		if value := header.Get(name); value != "" {
			kept[http.CanonicalHeaderKey(name)] = value
		}
	}
	return kept
}
