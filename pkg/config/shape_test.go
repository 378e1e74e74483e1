package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSecretWarnings(t *testing.T) {
	t.Parallel()

	const tail = "a1B2c3D4e5F6g7H8i9J0-must-not-leak"
	for name, tt := range map[string]struct {
		provider, secret string
		want             string // "" for no warning
	}{
		"StripeSigningSecretIsFine":     {"stripe", "whsec_" + tail, ""},
		"StripeAPIKeyIsNamed":           {"stripe", "sk_live_" + tail, "sources[pay].secrets[0] has the shape of a Stripe secret API key (sk_live_…), not of a stripe signing secret"},
		"StripeRestrictedKeyIsNamed":    {"stripe", "rk_test_" + tail, "a Stripe restricted API key (rk_test_…)"},
		"StripePublishableKeyIsNamed":   {"stripe", "pk_live_" + tail, "a Stripe publishable key (pk_live_…)"},
		"StripeWithoutWhsecIsNamed":     {"stripe", tail, "sources[pay].secrets[0] does not start with whsec_, as every stripe signing secret does"},
		"GitHubTokenIsNamed":            {"github", "ghp_" + tail, "a GitHub personal access token (ghp_…), not of a github signing secret"},
		"GitHubFineGrainedTokenIsNamed": {"github", "github_pat_" + tail, "a GitHub fine-grained personal access token (github_pat_…)"},
		"GitHubChosenSecretIsFine":      {"github", tail, ""},
		"SlackBotTokenIsNamed":          {"slack", "xoxb-" + tail, "a Slack bot token (xoxb-…)"},
		"SlackSigningSecretIsFine":      {"slack", "8f742231b10e8888abcd99yyyzzz85a5", ""},
		"ShopifyAccessTokenIsNamed":     {"shopify", "shpat_" + tail, "a Shopify Admin API access token"},
		"StandardWebhooksSecretIsFine":  {"standardwebhooks", "whsec_" + tail, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := &SourceConfig{Name: "pay", Provider: tt.provider, Secrets: []Secret{Secret(tt.secret)}}
			warnings := src.SecretWarnings()
			if tt.want == "" {
				require.Empty(t, warnings)
				return
			}
			require.Len(t, warnings, 1)
			require.Contains(t, warnings[0], tt.want)
			require.NotContains(t, warnings[0], tail, "never the value")
		})
	}
}

func TestLoadWarnsOfASecretOfAnotherShape(t *testing.T) {
	t.Parallel()

	const apiKey = "sk_live_51Habc-must-not-leak"
	cfg, err := loadIn(writeFile(t, "hookinbox.yaml", strings.Replace(minimalYAML, testSecret, "${STRIPE_WEBHOOK_SECRET}", 1)),
		NeedDatabase|NeedReceiver, map[string]string{"STRIPE_WEBHOOK_SECRET": apiKey})
	require.NoError(t, err, "a warning, not a refusal: the shape is a guess")
	require.Equal(t, []string{
		"sources[stripe].secrets[0] has the shape of a Stripe secret API key (sk_live_…), not of a stripe signing secret: every delivery will get 401 until it is replaced",
	}, cfg.Warnings())

	// A worker does not verify signatures: it is not told.
	cfg, err = loadIn(writeFile(t, "hookinbox.yaml", strings.Replace(minimalYAML, testSecret, apiKey, 1)), NeedDatabase, nil)
	require.NoError(t, err)
	require.Empty(t, cfg.Warnings())
}

func TestLoadDoesNotWarnOfReferencedOrDocumentedVariables(t *testing.T) {
	t.Parallel()

	yaml := minimalYAML + `
worker:
  admin: {token: "${HOOKINBOX_ADMIN_TOKEN}"}
  routes: [{source: stripe, handlers: [log]}]
tracing: {headers: {Authorization: "${HOOKINBOX_OTLP_AUTH}"}}
`
	env := map[string]string{
		"HOOKINBOX_ADMIN_TOKEN": "admin-token-of-32-bytes-at-least!",
		"HOOKINBOX_OTLP_AUTH":   "Bearer x",
		"HOOKINBOX_OTLP_AUTHZ":  "y",
	}
	cfg, err := loadIn(writeFile(t, "hookinbox.yaml", yaml), NeedDatabase|NeedReceiver|NeedWorker, env)
	require.NoError(t, err)
	require.Equal(t, []string{"HOOKINBOX_OTLP_AUTHZ matches no config key, so it is ignored"}, cfg.Warnings(),
		"a referenced variable is used; an unreferenced one is still a likely typo")

	// The receiver, given the worker's Secret, has the documented variable
	// without referencing it.
	cfg, err = loadIn(writeFile(t, "hookinbox.yaml", minimalYAML), NeedDatabase|NeedReceiver, map[string]string{"HOOKINBOX_ADMIN_TOKEN": "x"})
	require.NoError(t, err)
	require.Empty(t, cfg.Warnings())
}
