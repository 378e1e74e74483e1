package reconcile

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/hookinbox/hookinbox/pkg/provider"
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

// parserSecret stands in for the signing secrets of a verifier that only
// parses.
const parserSecret = "hookinbox-reconcile-parses-never-verifies" //nolint:gosec // a stand-in that verifies nothing, not a credential

// Providers are the providers a source can reconcile.
var Providers = []string{"github", "paddle", "square", "stripe"}

// windows are how far back each provider lists events (Stripe 30 days,
// Square 28, Paddle: this much at least) or redelivers them (GitHub 3 days).
var windows = map[string]time.Duration{
	"stripe": 720 * time.Hour,
	"paddle": 720 * time.Hour,
	"square": 672 * time.Hour,
	"github": GitHubWindow,
}

// baseURLs are each provider's API root.
var baseURLs = map[string]string{
	"stripe": StripeBaseURLDefault,
	"paddle": PaddleBaseURLDefault,
	"square": SquareBaseURLDefault,
	"github": GitHubBaseURLDefault,
}

// Config configures a source's reconciliation: the worker periodically
// asks the provider's API what it sent, and claims the missing events
// (Stripe, Paddle, Square) or asks for them to be redelivered (GitHub).
// Its fields are the keys of a source's reconcile: section of the YAML
// configuration (pkg/config decodes them directly); the secrets stay secret
// types until Source reveals them. WithDefaults applies the defaults stated
// below, Validate checks the fields.
type Config struct {
	// Enabled runs the reconciliation (providers stripe, paddle, square and
	// github). Defaults to false.
	Enabled bool `mapstructure:"enabled"`
	// APIKey is the provider's API credential, sent as a bearer token: for
	// Stripe a restricted key (rk_…) with read access to Events only; for
	// Paddle an API key that may read events; for Square an access token
	// with read access to events; for GitHub a token that may read and
	// redeliver the hook's deliveries (unless hook is app). Reference the
	// environment ("${STRIPE_RECONCILE_KEY}"). Required when Enabled, but
	// for a GitHub App.
	APIKey secret.String `mapstructure:"api_key"`
	// APIBaseURL is the provider API's root. Defaults to the provider's:
	// https://api.stripe.com, https://api.paddle.com,
	// https://connect.squareup.com or https://api.github.com.
	APIBaseURL secret.URL `mapstructure:"api_base_url"`
	// Interval is how often the source is reconciled. Defaults to 15m.
	Interval time.Duration `mapstructure:"interval"`
	// Lookback is the overlap of the windows: each run lists from the start
	// of the last run that finished (the watermark) less Lookback, or from
	// Lookback ago for the first run; never further back than the provider
	// keeps (Stripe and Paddle 720h, Square 672h, GitHub 71h). At least
	// Interval, at most 720h. Defaults to 1h.
	Lookback time.Duration `mapstructure:"lookback"`
	// Hook (github only) names the webhook whose deliveries are
	// redelivered: "repos/OWNER/REPO/hooks/ID", "orgs/ORG/hooks/ID" or
	// "app" (the GitHub App's webhook, authenticated by app_id and
	// private_key). Required for github.
	Hook string `mapstructure:"hook"`
	// AppID (github, hook app) is the GitHub App's id, the JWT's issuer.
	AppID string `mapstructure:"app_id"`
	// PrivateKey (github, hook app) is the GitHub App's private key, PEM.
	// Reference the environment ("${GITHUB_APP_PRIVATE_KEY}").
	PrivateKey secret.String `mapstructure:"private_key"`
	// APIVersion (square only) is the Square-Version header: set it to the
	// webhook subscription's API version so that listed events look like
	// delivered ones. Defaults to 2025-01-23.
	APIVersion string `mapstructure:"api_version"`
}

// WithDefaults returns a copy of c, the reconcile: section of a source of
// providerName, with every zero-valued setting at its documented default.
// It is idempotent.
func (c *Config) WithDefaults(providerName string) *Config {
	out := *c
	out.APIBaseURL = cmp.Or(out.APIBaseURL, secret.URL(baseURLs[providerName]))
	out.Interval = cmp.Or(out.Interval, IntervalDefault)
	out.Lookback = cmp.Or(out.Lookback, LookbackDefault)
	if providerName == "square" {
		out.APIVersion = cmp.Or(out.APIVersion, SquareVersionDefault)
	}
	return &out
}

// Validate checks a Config that WithDefaults filled, of a source of
// providerName, only when Enabled, and returns every problem found, each an
// error that starts with its key in the reconcile: section ("api_key:
// required …"), joined.
func (c *Config) Validate(providerName string) error {
	if !c.Enabled {
		return nil
	}
	if _, ok := windows[providerName]; !ok {
		return fmt.Errorf("enabled: reconciliation is implemented for providers %v, not %q", Providers, providerName)
	}
	var errs []error
	app := providerName == "github" && c.Hook == "app"
	if c.APIKey == "" && !app {
		errs = append(errs, errors.New("api_key: required when reconcile.enabled is true (a key with read access to events)"))
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
	errs = append(errs, c.validateGitHub(providerName)...)
	return errors.Join(errs...)
}

func (c *Config) validateGitHub(providerName string) []error {
	var errs []error
	if providerName != "github" {
		for key, set := range map[string]bool{"hook": c.Hook != "", "app_id": c.AppID != "", "private_key": c.PrivateKey != ""} {
			if set {
				errs = append(errs, fmt.Errorf("%s: github only", key))
			}
		}
		return errs
	}
	if !githubHook.MatchString(c.Hook) {
		errs = append(errs, errors.New("hook: required for github: repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app"))
	}
	if c.Hook == "app" {
		if c.AppID == "" {
			errs = append(errs, errors.New("app_id: required for hook app"))
		}
		if _, err := ParseRSAPrivateKey([]byte(c.PrivateKey.Reveal())); err != nil {
			errs = append(errs, fmt.Errorf("private_key: required for hook app, an RSA key in PEM: %w", err))
		}
	}
	return errs
}

// Source returns the reconciliation of the source named name, of provider
// providerName, whose verifier is configured by verifier (its listed events
// are keyed by it), revealing the secrets only here.
func (c *Config) Source(name, providerName string, verifier *provider.Config) (*Source, error) {
	src := &Source{Name: name, Provider: providerName, Interval: c.Interval, Lookback: c.Lookback, Window: windows[providerName]}
	if providerName == "github" {
		var key []byte
		if c.PrivateKey != "" {
			key = []byte(c.PrivateKey.Reveal())
		}
		g, err := c.gitHub(key)
		if err != nil {
			return nil, err
		}
		src.GitHub = g
		return src, nil
	}
	// The parser keys events and never verifies one, and the worker's
	// environment need not hold the signing secrets (config.NeedWorker), so
	// it gets a stand-in: only the keying settings (twin types) matter.
	keying := *verifier
	keying.Secrets, keying.BasicAuth = []string{parserSecret}, nil
	parser, err := Parser(providerName, &keying)
	if err != nil {
		return nil, err
	}
	switch providerName {
	case "stripe":
		src.Fetcher, err = NewStripe(&StripeConfig{APIKey: c.APIKey.Reveal(), BaseURL: c.APIBaseURL.Reveal(), Parser: parser})
	case "paddle":
		src.Fetcher, err = NewPaddle(&PaddleConfig{APIKey: c.APIKey.Reveal(), BaseURL: c.APIBaseURL.Reveal(), Parser: parser})
	case "square":
		src.Fetcher, err = NewSquare(&SquareConfig{AccessToken: c.APIKey.Reveal(), BaseURL: c.APIBaseURL.Reveal(), Version: c.APIVersion, Parser: parser})
	default:
		err = fmt.Errorf("reconcile: provider %q cannot be reconciled", providerName)
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c *Config) gitHub(pemKey []byte) (*GitHub, error) {
	gc := &GitHubConfig{Hook: c.Hook, Token: c.APIKey.Reveal(), AppID: c.AppID, BaseURL: c.APIBaseURL.Reveal()}
	if c.Hook == "app" {
		key, err := ParseRSAPrivateKey(pemKey)
		if err != nil {
			return nil, err
		}
		gc.PrivateKey = key
	}
	return NewGitHub(gc)
}
