package reconcile_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

func TestConfig(t *testing.T) {
	t.Parallel()

	t.Run("DefaultsToTheProvidersAPI", func(t *testing.T) {
		t.Parallel()
		for name, want := range map[string]string{
			"stripe": "https://api.stripe.com", "paddle": "https://api.paddle.com",
			"square": "https://connect.squareup.com", "github": "https://api.github.com",
		} {
			c := reconcile.WithDefaults(&reconcile.Config{}, name)
			require.Equal(t, secret.URL(want), c.APIBaseURL, name)
			require.Equal(t, c, reconcile.WithDefaults(c, name), "idempotent")
		}
		require.Equal(t, reconcile.SquareVersionDefault, reconcile.WithDefaults(&reconcile.Config{}, "square").APIVersion)
	})

	t.Run("RefusesWhatCannotWork", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			provider string
			config   reconcile.Config
			want     string
		}{
			{"shopify", reconcile.Config{APIKey: "k"}, `enabled: reconciliation is implemented for providers [github paddle square stripe], not "shopify"`},
			{"paddle", reconcile.Config{}, "api_key: required"},
			{"github", reconcile.Config{APIKey: "k"}, "hook: required for github"},
			{"github", reconcile.Config{APIKey: "k", Hook: "repos/octo/hello/hooks/x"}, "hook: required for github"},
			{"github", reconcile.Config{Hook: "repos/octo/hello/hooks/1"}, "api_key: required"},
			{"github", reconcile.Config{Hook: "app", PrivateKey: "not pem"}, "app_id: required for hook app"},
			{"github", reconcile.Config{Hook: "app", AppID: "1", PrivateKey: "not pem"}, "private_key: required for hook app, an RSA key in PEM"},
			{"stripe", reconcile.Config{APIKey: "k", Hook: "app"}, "hook: github only"},
			{"square", reconcile.Config{APIKey: "k", Lookback: time.Minute}, "lookback: must be at least reconcile.interval"},
		} {
			tc.config.Enabled = true
			err := reconcile.Validate(reconcile.WithDefaults(&tc.config, tc.provider), tc.provider)
			require.ErrorContains(t, err, tc.want, "%s %+v", tc.provider, tc.config)
		}
	})

	t.Run("BuildsEachProvidersReconciliationWithoutTheSigningSecrets", func(t *testing.T) {
		t.Parallel()
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		pemKey := secret.String(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
		for _, tc := range []struct {
			provider string
			config   reconcile.Config
			verifier provider.Config
		}{
			// No signing secret: a worker's environment need not hold them.
			{"stripe", reconcile.Config{APIKey: "rk_1"}, provider.Config{}},
			{"paddle", reconcile.Config{APIKey: "pdl_1"}, provider.Config{}},
			{"square", reconcile.Config{APIKey: "EAAA1"}, provider.Config{URL: "https://h.example.com/w"}},
			{"github", reconcile.Config{APIKey: "ghp_1", Hook: "orgs/octo/hooks/7"}, provider.Config{}},
			{"github", reconcile.Config{Hook: "app", AppID: "1", PrivateKey: pemKey}, provider.Config{Secrets: []string{"s"}}},
		} {
			tc.config.Enabled = true
			c := reconcile.WithDefaults(&tc.config, tc.provider)
			require.NoError(t, reconcile.Validate(c, tc.provider))
			src, err := reconcile.NewSource(c, "src", tc.provider, &tc.verifier)
			require.NoError(t, err, tc.provider)
			require.Equal(t, tc.provider == "github", src.GitHub != nil)
			require.Equal(t, tc.provider != "github", src.Fetcher != nil)
			require.Positive(t, src.Window)
		}
	})
}
