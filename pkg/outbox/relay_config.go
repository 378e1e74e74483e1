package outbox

import (
	"cmp"
	"errors"
	"time"

	"go.uber.org/zap"
)

// The defaults WithDefaults applies to a zero RelayConfig or
// DestinationConfig field.
const (
	// BatchDefault is RelayConfig.Batch's default.
	BatchDefault = 100
	// LeaseDefault is RelayConfig.Lease's default.
	LeaseDefault = 2 * time.Minute
	// PollIntervalDefault is RelayConfig.PollInterval's default.
	PollIntervalDefault = time.Second
	// ConcurrencyDefault is DestinationConfig.Concurrency's default.
	ConcurrencyDefault = 8
	// MaxAttemptsDefault is DestinationConfig.MaxAttempts's default.
	MaxAttemptsDefault = 20
	// BackoffMinDefault is DestinationConfig.BackoffMin's default.
	BackoffMinDefault = time.Second
	// BackoffMaxDefault is DestinationConfig.BackoffMax's default.
	BackoffMaxDefault = time.Hour
)

// DestinationConfig is a destination as the worker's relay (internal/relay)
// delivers to it. Its tagged fields, the delivery policy, are keys of each
// entry of the worker: section's destinations (pkg/config squashes them
// in); Destination is set in code. WithDefaults applies the defaults stated below, Validate checks
// the tagged fields.
type DestinationConfig struct {
	// Destination delivers the messages. Required.
	Destination Destination `mapstructure:"-"`
	// Concurrency caps the deliveries in flight at once per worker.
	// Defaults to 8.
	Concurrency int `mapstructure:"concurrency"`
	// Rate caps the deliveries started per second per worker. Defaults to
	// 0: no cap.
	Rate float64 `mapstructure:"rate"`
	// MaxAttempts is how many attempts a message gets before it is failed
	// (listed by `inboxctl outbox list`, put back by `inboxctl outbox
	// replay`). Defaults to 20.
	MaxAttempts int `mapstructure:"max_attempts"`
	// BackoffMin is the least wait between attempts (doubled per attempt,
	// half of it random). The destination as a whole also pauses that
	// long after consecutive failures. Defaults to 1s.
	BackoffMin time.Duration `mapstructure:"backoff_min"`
	// BackoffMax caps the wait between attempts. Defaults to 1h.
	BackoffMax time.Duration `mapstructure:"backoff_max"`
}

// WithDefaults returns a copy of d with every zero-valued setting at its
// documented default. It is idempotent.
func (d *DestinationConfig) WithDefaults() *DestinationConfig {
	out := *d
	out.Concurrency = cmp.Or(out.Concurrency, ConcurrencyDefault)
	out.MaxAttempts = cmp.Or(out.MaxAttempts, MaxAttemptsDefault)
	out.BackoffMin = cmp.Or(out.BackoffMin, BackoffMinDefault)
	out.BackoffMax = cmp.Or(out.BackoffMax, BackoffMaxDefault)
	return &out
}

// Validate checks the settings (the tagged fields) of a DestinationConfig
// that WithDefaults filled, and returns every problem found, each an error
// that starts with its key within the destination's entry ("concurrency:
// must be positive"), joined.
func (d *DestinationConfig) Validate() error {
	var errs []error
	if d.Concurrency <= 0 {
		errs = append(errs, errors.New("concurrency: must be positive"))
	}
	if d.MaxAttempts <= 0 {
		errs = append(errs, errors.New("max_attempts: must be positive"))
	}
	if d.Rate < 0 {
		errs = append(errs, errors.New("rate: must not be negative"))
	}
	if d.BackoffMin <= 0 || d.BackoffMax < d.BackoffMin {
		errs = append(errs, errors.New("backoff_max: backoff_min must be positive and backoff_max at least backoff_min"))
	}
	return errors.Join(errs...)
}

// RelayConfig configures the outbox relay a worker runs (internal/relay,
// worker.Config.Outbox). Its tagged fields are keys of the worker:
// section's outbox.relay (pkg/config squashes them in); the others are set
// in code. WithDefaults applies the defaults stated below, Validate checks
// the tagged fields.
type RelayConfig struct {
	// Destinations the relay delivers to, by name; a message whose
	// destination is not here is left pending for a relay that has it.
	Destinations map[string]*DestinationConfig `mapstructure:"-"`
	// Batch is the most messages of one destination claimed at once; a
	// crashed relay re-sends at most one batch per destination. Defaults
	// to 100.
	Batch int `mapstructure:"batch"`
	// Lease is how long a claimed batch belongs to its relay; it must
	// exceed the time the batch's deliveries take (batch / concurrency
	// slow deliveries, each bounded by the destination's timeout). After
	// it, a relay that died has its batch claimed again. Defaults to 2m.
	Lease time.Duration `mapstructure:"lease"`
	// PollInterval is how often an idle relay looks for due messages when
	// no notification wakes it (retries falling due, or behind a pooler).
	// Defaults to 1s.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// PollOnly turns off LISTEN: behind a transaction pooler (PgBouncer's
	// pool_mode = transaction) a LISTEN has no session to live in, and the
	// relay polls every PollInterval.
	PollOnly bool `mapstructure:"-"`
	// Logger defaults to a no-op logger.
	Logger *zap.Logger `mapstructure:"-"`
	// Observe, when set, is told each finished delivery attempt: its
	// destination and outcome ("delivered", "retried", "failed",
	// "disabled": internal/relay's Outcome constants). The worker counts them in
	// hookinbox_outbox_deliveries_total.
	Observe func(destination, outcome string) `mapstructure:"-"`
}

// WithDefaults returns a copy of c with every zero-valued setting at its
// documented default (the destinations' own defaults are theirs). It is
// idempotent.
func (c *RelayConfig) WithDefaults() *RelayConfig {
	out := *c
	out.Batch = cmp.Or(out.Batch, BatchDefault)
	out.Lease = cmp.Or(out.Lease, LeaseDefault)
	out.PollInterval = cmp.Or(out.PollInterval, PollIntervalDefault)
	return &out
}

// Validate checks the settings (the tagged fields) of a RelayConfig that
// WithDefaults filled, and returns every problem found, each an error that
// starts with its key within worker.outbox.relay ("batch: must be
// positive"), joined.
func (c *RelayConfig) Validate() error {
	var errs []error
	if c.Batch <= 0 {
		errs = append(errs, errors.New("batch: must be positive"))
	}
	if c.Lease <= 0 {
		errs = append(errs, errors.New("lease: must be positive"))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, errors.New("poll_interval: must be positive"))
	}
	return errors.Join(errs...)
}
