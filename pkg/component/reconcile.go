package component

import (
	"time"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

// ReconcileConfig configures a source's reconciliation: the worker periodically
// asks the provider's API what it sent, and claims the missing events
// (Stripe, Paddle, Square) or asks for them to be redelivered (GitHub).
// Its fields are the keys of a source's reconcile: section of the YAML
// configuration (pkg/config decodes them directly); the secrets stay secret
// types until internal/reconcile's NewSource reveals them. Its defaults and
// checks depend on the provider, and are internal/reconcile's (WithDefaults,
// Validate), which aliases it.
type ReconcileConfig struct {
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
