package config

import (
	"testing"

	"github.com/stretchr/testify/require"
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
				Secrets:     []string{"${A}", "x-${B}-y"},
				SecretsFile: "${DIR}/stripe",
			}},
			Worker: WorkerConfig{
				Queues: []string{"${QUEUE}"},
				Routes: []RouteConfig{{Source: "${SOURCE}", Types: []string{"${TYPE}.*"}, Handlers: []string{"${HANDLER}"}}},
			},
		}
		err := cfg.expandEnv(lookup(map[string]string{
			"DB_HOST": "db", "LEVEL": "debug", "A": "a$1", "B": "", "DIR": "/run/secrets",
			"QUEUE": "bank", "SOURCE": "stripe", "TYPE": "charge", "HANDLER": "log",
		}))
		require.NoError(t, err)
		require.Equal(t, "postgres://db/hookinbox", cfg.Database.URL)
		require.Equal(t, "debug", cfg.Log.Level)
		require.Equal(t, []string{"a$1", "x--y"}, cfg.Sources[0].Secrets, "values are not expanded again; set but empty expands to empty")
		require.Equal(t, "/run/secrets/stripe", cfg.Sources[0].SecretsFile)
		require.Equal(t, []string{"bank"}, cfg.Worker.Queues)
		require.Equal(t, RouteConfig{Source: "stripe", Types: []string{"charge.*"}, Handlers: []string{"log"}}, cfg.Worker.Routes[0])
	})

	t.Run("OnlyTheBracedFormIsExpanded", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{Sources: []SourceConfig{{
			Secrets: []string{"$A", "$", "a$b", "${", "${1A}", "${ A }", "$$", "${}"},
		}}}
		require.NoError(t, cfg.expandEnv(lookup(map[string]string{"A": "expanded"})))
		require.Equal(t, []string{"$A", "$", "a$b", "${", "${1A}", "${ A }", "$$", "${}"}, cfg.Sources[0].Secrets)
	})

	t.Run("UnsetVariablesAreAllReportedByKey", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{
			Database: DatabaseConfig{URL: "${DATABASE_URL}"},
			Sources: []SourceConfig{
				{Secrets: []string{"ok"}},
				{Secrets: []string{"${SET}", "${STRIPE_WEBHOOK_SECRET}"}},
			},
			Worker: WorkerConfig{Routes: []RouteConfig{{Handlers: []string{"${H}"}}}},
		}
		err := cfg.expandEnv(lookup(map[string]string{"SET": testSecret}))
		require.EqualError(t, err, "database.url: environment variable DATABASE_URL is not set\n"+
			"sources[1].secrets[1]: environment variable STRIPE_WEBHOOK_SECRET is not set\n"+
			"worker.routes[0].handlers[0]: environment variable H is not set")
	})
}
