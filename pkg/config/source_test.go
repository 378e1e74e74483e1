package config

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

func TestSourceConfigProviderConfig(t *testing.T) {
	t.Parallel()

	t.Run("CopiesEveryVerifierKey", func(t *testing.T) {
		t.Parallel()

		s := hmacSource()
		s.Tolerance = time.Minute
		s.BasicAuth = []BasicAuthConfig{{Username: "a", Password: "pa"}, {Username: "b", Password: "pb"}}
		s.URL = "https://hooks.example.com/partner"
		s.Algorithm = "sha512"
		s.HMAC = HMACConfig{
			Header: "X-Sig", Prefix: "sha512=", Encoding: "base64", Template: "{timestamp}.{body}",
			TimestampHeader: "X-Ts", IDHeader: "X-Id", IDPath: "data.id", TypeHeader: "X-Type", TypePath: "type",
			APIKeyHeader: "X-Key", APIKeys: []secret.String{"k1", "k2"}, ChallengePath: "challenge",
		}

		require.Equal(t, &provider.Config{
			Secrets:   []string{testSecret},
			Tolerance: time.Minute,
			BasicAuth: []provider.BasicAuth{{Username: "a", Password: "pa"}, {Username: "b", Password: "pb"}},
			URL:       "https://hooks.example.com/partner",
			Algorithm: "sha512",
			HMAC: &provider.HMACConfig{
				Header: "X-Sig", Prefix: "sha512=", Encoding: "base64", Template: "{timestamp}.{body}",
				TimestampHeader: "X-Ts", IDHeader: "X-Id", IDPath: "data.id", TypeHeader: "X-Type", TypePath: "type",
				APIKeyHeader: "X-Key", APIKeys: []string{"k1", "k2"}, ChallengePath: "challenge",
			},
		}, s.ProviderConfig())
	})

	t.Run("HMACOnlyForTheHMACProvider", func(t *testing.T) {
		t.Parallel()

		s := validConfig().Sources[0]
		require.Nil(t, s.ProviderConfig().HMAC)
		require.Nil(t, s.ProviderConfig().BasicAuth)
	})

	t.Run("KeepsUnsetTwinTypesApartFromEmpty", func(t *testing.T) {
		t.Parallel()

		s := validConfig().Sources[0]
		require.Nil(t, s.ProviderConfig().TwinTypes, "unset: the default list")
		s.TwinTypes = []string{}
		require.NotNil(t, s.ProviderConfig().TwinTypes, "empty: twin keys off")
		require.Empty(t, s.ProviderConfig().TwinTypes)
	})

	t.Run("SharesNoSliceWithTheSource", func(t *testing.T) {
		t.Parallel()

		s := hmacSource()
		s.TwinTypes = []string{"invoice.paid"}
		pc := s.ProviderConfig()
		pc.Secrets[0] = "changed"
		pc.TwinTypes[0] = "changed"
		pc.HMAC.APIKeys[0] = "changed"
		require.Equal(t, []string{testSecret}, secret.Reveal(s.Secrets))
		require.Equal(t, []string{"invoice.paid"}, s.TwinTypes)
		require.Equal(t, []string{"key-" + testSecret}, secret.Reveal(s.HMAC.APIKeys))
	})

	t.Run("BuildsAVerifier", func(t *testing.T) {
		t.Parallel()

		for _, s := range validConfig().Sources {
			_, err := provider.New(s.Provider, s.ProviderConfig())
			require.NoError(t, err, s.Name)
		}
	})
}

func TestSourceConfigAllowIPPrefixes(t *testing.T) {
	t.Parallel()

	t.Run("BareAddressesAreSingleHosts", func(t *testing.T) {
		t.Parallel()

		s := &SourceConfig{AllowIPs: []string{"10.0.0.0/8", "203.0.113.7", "2001:db8::/32", "2001:db8::1"}}
		prefixes, err := s.AllowIPPrefixes()
		require.NoError(t, err)
		require.Equal(t, []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("203.0.113.7/32"),
			netip.MustParsePrefix("2001:db8::/32"),
			netip.MustParsePrefix("2001:db8::1/128"),
		}, prefixes)
	})

	t.Run("NoneMeansNil", func(t *testing.T) {
		t.Parallel()

		prefixes, err := (&SourceConfig{}).AllowIPPrefixes()
		require.NoError(t, err)
		require.Nil(t, prefixes)
	})

	t.Run("ErrorsNameEveryBadEntry", func(t *testing.T) {
		t.Parallel()

		s := &SourceConfig{AllowIPs: []string{"nope", "10.0.0.0/8", "10.1.2.3/16"}}
		prefixes, err := s.AllowIPPrefixes()
		require.Nil(t, prefixes)
		require.EqualError(t, err, `allow_ips[0]: "nope" is not a CIDR prefix (10.0.0.0/8) or an IP address`+"\n"+
			`allow_ips[2]: "10.1.2.3/16" has host bits set; write 10.1.0.0/16 for the network, or 10.1.2.3/32 for the one host`)
	})
}

// TestValidateProviderRequirements checks that what a provider requires is
// reported at start-up under the source's key, and that meeting it is
// enough. A provider not registered yet is skipped.
func TestValidateProviderRequirements(t *testing.T) {
	t.Parallel()

	const hexKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	basicAuth := []BasicAuthConfig{{Username: "hookinbox", Password: "Marqeta-Passw0rd-1234!"}}
	for _, tt := range []struct {
		name    string
		missing SourceConfig // lacks what the provider requires
		fix     func(*SourceConfig)
	}{
		{"GitHubNeedsSecrets", SourceConfig{Provider: "github"}, func(s *SourceConfig) { s.Secrets = []secret.String{"gh"} }},
		{"SquareNeedsURL", SourceConfig{Provider: "square", Secrets: []secret.String{"key"}}, func(s *SourceConfig) { s.URL = "https://hooks.example.com/square" }},
		{"TwilioNeedsURL", SourceConfig{Provider: "twilio", Secrets: []secret.String{"token"}}, func(s *SourceConfig) { s.URL = "https://hooks.example.com/twilio" }},
		{"MarqetaNeedsBasicAuthButNoSecret", SourceConfig{Provider: "marqeta"}, func(s *SourceConfig) { s.BasicAuth = basicAuth }},
		{"MarqetaAlgorithmIsSHA1OrSHA256", SourceConfig{Provider: "marqeta", BasicAuth: basicAuth, Secrets: []secret.String{testSecret}, Algorithm: "sha512"}, func(s *SourceConfig) { s.Algorithm = "sha1" }},
		{"AdyenNeedsBasicAuth", SourceConfig{Provider: "adyen", Secrets: []secret.String{hexKey}}, func(s *SourceConfig) { s.BasicAuth = basicAuth }},
		{"AdyenNeedsAHexKey", SourceConfig{Provider: "adyen", BasicAuth: basicAuth, Secrets: []secret.String{"not-hex"}}, func(s *SourceConfig) { s.Secrets = []secret.String{hexKey} }},
		{"HMACNeedsHeader", SourceConfig{Provider: "hmac", Secrets: []secret.String{testSecret}, HMAC: HMACConfig{IDPath: "id"}}, func(s *SourceConfig) { s.HMAC.Header = "X-Signature" }},
		{"SlackNeedsSecrets", SourceConfig{Provider: "slack"}, func(s *SourceConfig) { s.Secrets = []secret.String{"signing"} }},
		{"PaddleNeedsSecrets", SourceConfig{Provider: "paddle"}, func(s *SourceConfig) { s.Secrets = []secret.String{"pdl_ntfset_x"} }},
		{"SvixNeedsSecrets", SourceConfig{Provider: "svix"}, func(s *SourceConfig) { s.Secrets = []secret.String{testBankSecret} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, ok := provider.PresetFor(tt.missing.Provider); !ok {
				t.Skipf("provider %q is not registered yet", tt.missing.Provider)
			}

			cfg := validConfig()
			source := tt.missing
			source.Name = "under-test"
			cfg.Sources = append(cfg.Sources, source)
			cfg.ApplyDefaults()
			err := cfg.Validate()
			require.ErrorContains(t, err, "sources[under-test]: "+tt.missing.Provider+": ")
			require.NotContains(t, err.Error(), "sources[stripe]")
			require.NotContains(t, err.Error(), "sources[bank]")

			tt.fix(&cfg.Sources[2])
			require.NoError(t, cfg.Validate())
		})
	}
}
