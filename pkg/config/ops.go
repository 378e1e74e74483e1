package config

import (
	"cmp"
	"net/url"
	"time"

	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/rejection"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

// This file holds the operations keys of issue 14's second half, kept
// together: receiver.rejections, sources[].reconcile, worker.pause_refresh
// and worker.admin.

// RejectionsConfig configures the rejection samples the receiver keeps per
// source (see package rejection; `inboxctl rejections SOURCE`).
type RejectionsConfig struct {
	// Disabled records no sample. Defaults to false: samples are kept.
	Disabled bool `mapstructure:"disabled"`
	// RecorderConfig holds the recorder's own settings (keep, sample_burst,
	// sample_every): their keys, defaults and validation are
	// internal/rejection's.
	rejection.RecorderConfig `mapstructure:",squash"`
}

// ReconcileConfig configures a source's reconciliation: the worker
// periodically lists the provider's recent events and claims the missing
// ones. Stripe only, for now.
type ReconcileConfig struct {
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

// WorkerAdminConfig configures the worker's admin HTTP API at /admin/v1/
// on worker.listen.
type WorkerAdminConfig struct {
	// Token is the bearer token every admin request must carry. The API is
	// off when it is empty: never served open. Reference the environment
	// ("${HOOKINBOX_ADMIN_TOKEN}"); at least 16 bytes. Defaults to empty.
	Token secret.String `mapstructure:"token"`
}

// The defaults of the keys above.
const (
	defaultReconcileInterval   = 15 * time.Minute
	defaultReconcileLookback   = time.Hour
	defaultReconcileAPIBaseURL = reconcile.StripeBaseURLDefault
	maxReconcileLookback       = 720 * time.Hour
	minAdminTokenBytes         = 16
	reconcileProviderStripe    = "stripe"
)

func (c *Config) applyOpsDefaults() {
	r := &c.Receiver.Rejections
	r.RecorderConfig = *r.WithDefaults() // the recorder's own defaults
	for i := range c.Sources {
		rc := &c.Sources[i].Reconcile
		rc.APIBaseURL = cmp.Or(rc.APIBaseURL, defaultReconcileAPIBaseURL)
		rc.Interval = cmp.Or(rc.Interval, defaultReconcileInterval)
		rc.Lookback = cmp.Or(rc.Lookback, defaultReconcileLookback)
	}
}

func (c *Config) validateOps(p *problems) {
	ownerProblems(p, "receiver.rejections.", c.Receiver.Rejections.Validate()) // the recorder's own checks

	keys := c.sourceKeys()
	for i := range c.Sources {
		s := &c.Sources[i]
		rc := &s.Reconcile
		key := keys[i] + ".reconcile"
		if !rc.Enabled {
			continue
		}
		if s.Provider != reconcileProviderStripe {
			p.addf(key+".enabled", "reconciliation is implemented for provider stripe only, not %q", s.Provider)
		}
		if rc.APIKey == "" {
			p.addf(key+".api_key", "required when reconcile.enabled is true (a restricted key with read access to events)")
		}
		if u, err := url.Parse(rc.APIBaseURL.Reveal()); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.addf(key+".api_base_url", "must be an absolute http:// or https:// URL")
		}
		positive(p, key+".interval", rc.Interval)
		switch {
		case rc.Lookback < rc.Interval:
			p.addf(key+".lookback", "must be at least reconcile.interval (%s), or events created between runs are never listed", rc.Interval)
		case rc.Lookback > maxReconcileLookback:
			p.addf(key+".lookback", "must be at most %s: Stripe lists the last 30 days of events", maxReconcileLookback)
		}
	}

	if t := c.Worker.Admin.Token; t != "" && len(t) < minAdminTokenBytes {
		p.addf("worker.admin.token", "must be at least %d bytes (or empty to turn the admin API off)", minAdminTokenBytes)
	}
}
