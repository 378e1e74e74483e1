package reconcile

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/hookinbox/hookinbox/pkg/component"
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

// Config configures a source's reconciliation, declared in pkg/component
// (ReconcileConfig) so that pkg/config names a public type. WithDefaults
// applies the defaults stated there, Validate checks the fields.
type Config = component.ReconcileConfig

// WithDefaults returns a copy of c, the reconcile: section of a source of
// providerName, with every zero-valued setting at its documented default.
// It is idempotent.
func WithDefaults(c *Config, providerName string) *Config {
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
func Validate(c *Config, providerName string) error {
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
	errs = append(errs, validateGitHub(c, providerName)...)
	return errors.Join(errs...)
}

func validateGitHub(c *Config, providerName string) []error {
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

// NewSource returns the reconciliation c of the source named name, of provider
// providerName, whose verifier is configured by verifier (its listed events
// are keyed by it), revealing the secrets only here.
func NewSource(c *Config, name, providerName string, verifier *provider.Config) (*Source, error) {
	src := &Source{Name: name, Provider: providerName, Interval: c.Interval, Lookback: c.Lookback, Window: windows[providerName]}
	if providerName == "github" {
		var key []byte
		if c.PrivateKey != "" {
			key = []byte(c.PrivateKey.Reveal())
		}
		g, err := gitHub(c, key)
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

func gitHub(c *Config, pemKey []byte) (*GitHub, error) {
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
