package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedacted(t *testing.T) {
	t.Parallel()

	setup := func() *Config {
		cfg := validConfig()
		cfg.Sources[0].Secrets = []string{testSecret, testSecret + "-old"}
		return cfg
	}

	t.Run("HidesPasswordAndSecrets", func(t *testing.T) {
		t.Parallel()

		cfg := setup()
		redacted := cfg.Redacted()

		database := redacted["database"].(map[string]any)
		require.Equal(t, "postgres://hookinbox:xxxxx@localhost:5432/hookinbox", database["url"])
		source := redacted["sources"].([]any)[0].(map[string]any)
		require.Equal(t, "2 redacted", source["secrets"])
		require.Equal(t, "5m0s", source["tolerance"])
	})

	t.Run("NoSecretInAnyRendering", func(t *testing.T) {
		t.Parallel()

		cfg := setup()
		var slogOut bytes.Buffer
		slog.New(slog.NewJSONHandler(&slogOut, nil)).Info("config", "config", *cfg, "ptr", cfg)

		for name, out := range map[string]string{
			"Redacted":       fmt.Sprint(cfg.Redacted()),
			"String":         cfg.String(),
			"%v":             fmt.Sprintf("%v", cfg),
			"%+v":            fmt.Sprintf("%+v", *cfg),
			"%#v":            fmt.Sprintf("%#v", cfg),
			"%s":             fmt.Sprintf("%s", cfg),
			"SourceValue%+v": fmt.Sprintf("%+v", cfg.Sources[0]),
			"Source%#v":      fmt.Sprintf("%#v", cfg.Sources),
			"Database%+v":    fmt.Sprintf("%+v", cfg.Database),
			"Database%#v":    fmt.Sprintf("%#v", cfg.Database),
			"slog":           slogOut.String(),
		} {
			require.NotContains(t, out, testSecret, name)
			require.NotContains(t, out, testDatabasePassword, name)
			require.True(t, strings.Contains(out, "redacted") || strings.Contains(out, "xxxxx"), name)
		}
	})

	t.Run("CoversEveryKey", func(t *testing.T) {
		t.Parallel()

		redacted := setup().Redacted()
		for _, key := range scalarKeys(reflect.TypeFor[Config](), "") {
			section, name, _ := strings.Cut(key, ".")
			require.Contains(t, redacted[section], name, key)
		}
		require.Contains(t, redacted["worker"], "queues")
		require.Contains(t, redacted["worker"], "routes")

		source := redacted["sources"].([]any)[0].(map[string]any)
		route := redacted["worker"].(map[string]any)["routes"].([]any)[0].(map[string]any)
		require.ElementsMatch(t, tagNames(reflect.TypeFor[SourceConfig]()), mapKeys(source))
		require.ElementsMatch(t, tagNames(reflect.TypeFor[RouteConfig]()), mapKeys(route))
	})
}

// tagNames returns the mapstructure names of t's fields.
func tagNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		names = append(names, t.Field(i).Tag.Get("mapstructure"))
	}
	return names
}

func mapKeys(m map[string]any) []string {
	var keys []string
	for key := range m {
		keys = append(keys, key)
	}
	return keys
}
