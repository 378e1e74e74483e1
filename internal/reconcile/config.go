package reconcile

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

// The defaults Config.WithDefaults applies, and the bound Validate checks.
const (
	// IntervalDefault is Config.Interval's default.
	IntervalDefault = 15 * time.Minute
	// LookbackDefault is Config.Lookback's default.
	LookbackDefault = time.Hour
	// LookbackMax is the longest Config.Lookback: Stripe lists the last 30
	// days of events.
	LookbackMax = 720 * time.Hour
)

// Config configures a source's reconciliation: the worker periodically
// lists the provider's recent events and claims the missing ones. Stripe
// only, for now. Its fields are the keys of a source's reconcile: section
// of the YAML configuration (pkg/config decodes them directly); the
// secrets stay secret types until Source reveals them. WithDefaults
// applies the defaults stated below, Validate checks the fields.
type Config struct {
	// Enabled runs the reconciliation. Defaults to false.
	Enabled bool `mapstructure:"enabled"`
	// APIKey is the provider's API key: for Stripe a restricted key (rk_…)
	// with read access to Events only. Reference the environment
	// ("${STRIPE_RECONCILE_KEY}"). Required when Enabled.
	APIKey secret.String `mapstructure:"api_key"`
	// APIBaseURL is the provider API's root. Defaults to
	// https://api.stripe.com.
	APIBaseURL secret.URL `mapstructure:"api_base_url"`
	// Interval is how often the source is reconciled. Defaults to 15m.
	Interval time.Duration `mapstructure:"interval"`
	// Lookback is the window each run lists (events created in the last
	// Lookback); at least Interval, at most 720h (Stripe lists 30 days of
	// events). Defaults to 1h.
	Lookback time.Duration `mapstructure:"lookback"`
}

// WithDefaults returns a copy of c with every zero-valued setting at its
// documented default. It is idempotent.
func (c *Config) WithDefaults() *Config {
	out := *c
	out.APIBaseURL = cmp.Or(out.APIBaseURL, StripeBaseURLDefault)
	out.Interval = cmp.Or(out.Interval, IntervalDefault)
	out.Lookback = cmp.Or(out.Lookback, LookbackDefault)
	return &out
}

// Validate checks a Config that WithDefaults filled, only when Enabled,
// and returns every problem found, each an error that starts with its key
// in the reconcile: section ("api_key: required …"), joined. Which
// providers reconcile is the caller's check.
func (c *Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.APIKey == "" {
		errs = append(errs, errors.New("api_key: required when reconcile.enabled is true (a restricted key with read access to events)"))
	}
	if u, err := url.Parse(c.APIBaseURL.Reveal()); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, errors.New("api_base_url: must be an absolute http:// or https:// URL"))
	}
	if c.Interval <= 0 {
		errs = append(errs, errors.New("interval: must be positive"))
	}
	switch {
	case c.Lookback < c.Interval:
		errs = append(errs, fmt.Errorf("lookback: must be at least reconcile.interval (%s), or events created between runs are never listed", c.Interval))
	case c.Lookback > LookbackMax:
		errs = append(errs, fmt.Errorf("lookback: must be at most %s: Stripe lists the last 30 days of events", LookbackMax))
	}
	return errors.Join(errs...)
}

// Source returns the reconciliation of the source named name, of provider
// provider, that c configures: a Stripe fetcher keyed by parser
// (StripeParser of the source's config), revealing the API key and base
// URL only here.
func (c *Config) Source(name, provider string, parser EventParser) (*Source, error) {
	fetcher, err := NewStripe(&StripeConfig{APIKey: c.APIKey.Reveal(), BaseURL: c.APIBaseURL.Reveal(), Parser: parser})
	if err != nil {
		return nil, err
	}
	return &Source{Name: name, Provider: provider, Fetcher: fetcher, Interval: c.Interval, Lookback: c.Lookback}, nil
}
