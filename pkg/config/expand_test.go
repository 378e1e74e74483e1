package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestExpandEnv(t *testing.T) {
	t.Parallel()

	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			value, ok := env[name]
			return value, ok
		}
	}

	t.Run("ExpandsEveryStringIncludingSlicesAndSources", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{
			Database: DatabaseConfig{URL: "postgres://${DB_HOST}/hookinbox"},
			Log:      LogConfig{Level: "${LEVEL}"},
			Sources: []SourceConfig{{
				Name:        "stripe",
				Secrets:     []secret.String{"${A}", "x-${B}-y"},
				SecretsFile: "${DIR}/stripe",
			}},
			Worker: WorkerConfig{
				Queues: []string{"${QUEUE}"},
				Config: worker.Config{Routes: []worker.Route{{Source: "${SOURCE}", Types: []string{"${TYPE}.*"}, Handlers: []string{"${HANDLER}"}}}},
			},
		}
		err := expand(cfg, lookup(map[string]string{
			"DB_HOST": "db", "LEVEL": "debug", "A": "a$1", "B": "", "DIR": "/run/secrets",
			"QUEUE": "bank", "SOURCE": "stripe", "TYPE": "charge", "HANDLER": "log",
		}))
		require.NoError(t, err)
		require.Equal(t, "postgres://db/hookinbox", cfg.Database.URL.Reveal())
		require.Equal(t, "debug", cfg.Log.Level)
		require.Equal(t, []string{"a$1", "x--y"}, secret.Reveal(cfg.Sources[0].Secrets), "values are not expanded again; set but empty expands to empty")
		require.Equal(t, "/run/secrets/stripe", cfg.Sources[0].SecretsFile)
		require.Equal(t, []string{"bank"}, cfg.Worker.Queues)
		require.Equal(t, worker.Route{Source: "stripe", Types: []string{"charge.*"}, Handlers: []string{"log"}}, cfg.Worker.Routes[0])
	})

	t.Run("ReachesNestedCredentials", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{
			Receiver: ReceiverConfig{ServerConfig: component.ServerConfig{TrustedProxies: []string{"${PROXY_NET}"}}},
			Sources: []SourceConfig{{
				BasicAuth: []BasicAuthConfig{{Username: "${USER}", Password: "${PW_NEW}"}, {Username: "old", Password: "${PW_OLD}"}},
				URL:       "https://${HOST}/webhooks/twilio",
				Algorithm: "${ALG}",
				TwinTypes: []string{"${TWIN}"},
				AllowIPs:  []string{"${ALLOW}"},
				HMAC:      HMACConfig{Header: "${HEADER}", APIKeys: []secret.String{"${KEY_NEW}", "${KEY_OLD}"}},
			}},
		}
		require.NoError(t, expand(cfg, lookup(map[string]string{
			"PROXY_NET": "10.0.0.0/8", "USER": "hookinbox", "PW_NEW": "pw-new", "PW_OLD": "pw-old",
			"HOST": "hooks.example.com", "ALG": "sha1", "TWIN": "invoice.paid", "ALLOW": "203.0.113.7",
			"HEADER": "X-Signature", "KEY_NEW": "key-new", "KEY_OLD": "key-old",
		})))
		require.Equal(t, []string{"10.0.0.0/8"}, cfg.Receiver.TrustedProxies)
		require.Equal(t, SourceConfig{
			BasicAuth: []BasicAuthConfig{{Username: "hookinbox", Password: "pw-new"}, {Username: "old", Password: "pw-old"}},
			URL:       "https://hooks.example.com/webhooks/twilio",
			Algorithm: "sha1",
			TwinTypes: []string{"invoice.paid"},
			AllowIPs:  []string{"203.0.113.7"},
			HMAC:      HMACConfig{Header: "X-Signature", APIKeys: []secret.String{"key-new", "key-old"}},
		}, cfg.Sources[0])
	})

	t.Run("UnsetNestedReferencesAreNamedByKey", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{Sources: []SourceConfig{
			{Secrets: []secret.String{"ok"}},
			{
				BasicAuth: []BasicAuthConfig{{Username: "u", Password: "${SET}"}, {Username: "u2", Password: "${MARQETA_PW}"}},
				HMAC:      HMACConfig{APIKeys: []secret.String{"${API_KEY}"}},
			},
		}}
		err := expand(cfg, lookup(map[string]string{"SET": testSecret}))
		require.EqualError(t, err, "sources[1].basic_auth[1].password: environment variable MARQETA_PW is not set\n"+
			"sources[1].hmac.api_keys[0]: environment variable API_KEY is not set")
	})

	t.Run("OnlyTheBracedFormIsExpanded", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{Sources: []SourceConfig{{
			Secrets: []secret.String{"$A", "$", "a$b", "${", "${1A}", "${ A }", "$$", "${}"},
		}}}
		require.NoError(t, expand(cfg, lookup(map[string]string{"A": "expanded"})))
		require.Equal(t, []string{"$A", "$", "a$b", "${", "${1A}", "${ A }", "$$", "${}"}, secret.Reveal(cfg.Sources[0].Secrets))
	})

	t.Run("UnsetVariablesAreAllReportedByKey", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{
			Database: DatabaseConfig{URL: "${DATABASE_URL}"},
			Sources: []SourceConfig{
				{Secrets: []secret.String{"ok"}},
				{Secrets: []secret.String{"${SET}", "${STRIPE_WEBHOOK_SECRET}"}},
			},
			Worker: WorkerConfig{Config: worker.Config{Routes: []worker.Route{{Handlers: []string{"${H}"}}}}},
		}
		err := expand(cfg, lookup(map[string]string{"SET": testSecret}))
		require.EqualError(t, err, "database.url: environment variable DATABASE_URL is not set\n"+
			"sources[1].secrets[1]: environment variable STRIPE_WEBHOOK_SECRET is not set\n"+
			"worker.routes[0].handlers[0]: environment variable H is not set")
	})

	t.Run("SourcesAreNamedByNameWhereTheyHaveOne", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{Sources: []SourceConfig{
			{Name: "stripe", Secrets: []secret.String{"${STRIPE}"}},
			{Name: "Not Valid", Secrets: []secret.String{"${BAD}"}},
			{Name: "twin", Secrets: []secret.String{"${TWIN_A}"}},
			{Name: "twin", Secrets: []secret.String{"${TWIN_B}"}},
		}}
		err := expand(cfg, lookup(nil))
		require.EqualError(t, err, "sources[stripe].secrets[0]: environment variable STRIPE is not set\n"+
			"sources[1].secrets[0]: environment variable BAD is not set\n"+
			"sources[2].secrets[0]: environment variable TWIN_A is not set\n"+
			"sources[3].secrets[0]: environment variable TWIN_B is not set")
	})
}

// expand runs expandEnv and returns its problems joined.
func expand(cfg *Config, lookup func(string) (string, bool)) error {
	var p problems
	cfg.expandEnv(lookup, &p)
	return p.join()
}
