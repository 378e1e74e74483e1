package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

func TestSourceWithSecretsFile(t *testing.T) {
	t.Parallel()

	// setup loads a bank source with one secret of its own and the file's.
	setup := func(t *testing.T, file string) *Config {
		t.Helper()
		secretsPath := writeFile(t, "secrets", file)
		path := writeFile(t, "hookinbox.yaml", `
database:
  url: postgres://localhost/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["`+testSecret+`"]
  - name: bank
    provider: standardwebhooks
    secrets: ["`+testBankSecret+`"]
    secrets_file: `+secretsPath+`
`)
		cfg, err := loadIn(path, NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		return cfg
	}
	const (
		rotatedOld = "whsec_b2xkLXNlY3JldC1mcm9tLWZpbGU="
		rotatedNew = "whsec_bmV3LXNlY3JldC1mcm9tLWZpbGU="
	)

	t.Run("ReplacesTheFilesSecretsKeepingTheSourcesOwn", func(t *testing.T) {
		t.Parallel()
		cfg := setup(t, rotatedOld+"\n")
		require.Equal(t, []string{testBankSecret, rotatedOld}, secret.Reveal(cfg.Sources[1].Secrets))

		sc, err := cfg.SourceWithSecretsFile(1, []byte("# rotating\n"+rotatedOld+"\n"+rotatedNew+"\n"))
		require.NoError(t, err)
		require.Equal(t, []string{testBankSecret, rotatedOld, rotatedNew}, secret.Reveal(sc.Secrets))
		sc, err = cfg.SourceWithSecretsFile(1, []byte(rotatedNew))
		require.NoError(t, err)
		require.Equal(t, []string{testBankSecret, rotatedNew}, secret.Reveal(sc.Secrets))
		// The loaded config is not changed.
		require.Equal(t, []string{testBankSecret, rotatedOld}, secret.Reveal(cfg.Sources[1].Secrets))
	})

	t.Run("AFileWithNoSecretIsRefused", func(t *testing.T) {
		t.Parallel()
		cfg := setup(t, rotatedOld)
		for _, content := range []string{"", "\n\n", "# only a comment\n"} {
			_, err := cfg.SourceWithSecretsFile(1, []byte(content))
			require.ErrorIs(t, err, ErrNoSecrets)
		}
	})

	t.Run("ASecretTheProviderRefusesIsRefusedWithoutShowingIt", func(t *testing.T) {
		t.Parallel()
		cfg := setup(t, rotatedOld)
		const bad = "whsec_not-base64-and-not-to-be-shown"
		_, err := cfg.SourceWithSecretsFile(1, []byte(rotatedNew+"\n"+bad+"\n"))
		require.ErrorContains(t, err, "standardwebhooks: secrets[2]")
		require.NotContains(t, err.Error(), "not-base64-and-not-to-be-shown")
	})

	t.Run("ABuiltConfigHasNoFileSecretsToReplace", func(t *testing.T) {
		t.Parallel()
		cfg := validConfig()
		sc, err := cfg.SourceWithSecretsFile(1, []byte(rotatedNew))
		require.NoError(t, err)
		require.Equal(t, []string{testBankSecret, rotatedNew}, secret.Reveal(sc.Secrets))
		_, err = cfg.SourceWithSecretsFile(2, []byte(rotatedNew))
		require.Error(t, err)
	})
}
