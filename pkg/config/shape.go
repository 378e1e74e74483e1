package config

import (
	"fmt"
	"strings"
)

// credentialShape is the prefix of a credential that is not a webhook
// signing secret, and what it is.
type credentialShape struct {
	prefix string
	what   string
}

// otherCredentials are the shapes of API keys and tokens that get pasted
// where a signing secret belongs. Only the prefix is ever logged.
var otherCredentials = []credentialShape{
	{"sk_live_", "a Stripe secret API key"},
	{"sk_test_", "a Stripe secret API key"},
	{"rk_live_", "a Stripe restricted API key"},
	{"rk_test_", "a Stripe restricted API key"},
	{"pk_live_", "a Stripe publishable key"},
	{"pk_test_", "a Stripe publishable key"},
	{"ghp_", "a GitHub personal access token"},
	{"github_pat_", "a GitHub fine-grained personal access token"},
	{"gho_", "a GitHub OAuth token"},
	{"ghs_", "a GitHub App installation token"},
	{"ghu_", "a GitHub App user token"},
	{"xoxb-", "a Slack bot token"},
	{"xoxp-", "a Slack user token"},
	{"xapp-", "a Slack app-level token"},
	{"shpat_", "a Shopify Admin API access token"},
	{"-----BEGIN", "a PEM key"},
}

// signingPrefixes are the prefixes a provider's signing secrets always
// have.
var signingPrefixes = map[string]string{
	"stripe": "whsec_",
}

// SecretWarnings returns a warning for each of the source's secrets that
// has another credential's shape (a Stripe API key, a GitHub or Slack
// token, a PEM key) or lacks the provider's signing-secret prefix (a Stripe
// secret not starting with whsec_): such a source starts, then answers 401
// to every delivery. A warning names the source, the secret's index and the
// shape, never the value. Load returns them with Warnings.
func (s *SourceConfig) SecretWarnings() []string {
	var warnings []string
	for i, sec := range s.Secrets {
		value := strings.TrimSpace(sec.Reveal())
		key := fmt.Sprintf("sources[%s].secrets[%d]", s.Name, i)
		if shape, ok := otherShape(value); ok {
			warnings = append(warnings, fmt.Sprintf("%s has the shape of %s (%s…), not of a %s signing secret: every delivery will get 401 until it is replaced", key, shape.what, shape.prefix, s.Provider))
			continue
		}
		if want, ok := signingPrefixes[s.Provider]; ok && !strings.HasPrefix(value, want) {
			warnings = append(warnings, fmt.Sprintf("%s does not start with %s, as every %s signing secret does: every delivery will get 401 until it is replaced", key, want, s.Provider))
		}
	}
	return warnings
}

func otherShape(value string) (credentialShape, bool) {
	for _, shape := range otherCredentials {
		if strings.HasPrefix(value, shape.prefix) {
			return shape, true
		}
	}
	return credentialShape{}, false
}
