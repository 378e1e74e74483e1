package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/tracing"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestRedacted(t *testing.T) {
	t.Parallel()

	setup := func() *Config {
		cfg := validConfig()
		cfg.Receiver.TrustedProxies = []string{"10.0.0.0/8"}
		cfg.Sources[0].Secrets = []secret.String{testSecret, testSecret + "-old"}
		partner := hmacSource()
		partner.BasicAuth = []BasicAuthConfig{{Username: "partner-user", Password: testPassword}}
		partner.URL = "https://twilio:" + testPassword + "@hooks.example.com/partner?x=1"
		partner.Algorithm = "sha512"
		partner.AllowIPs = []string{"203.0.113.7"}
		partner.HMAC.APIKeys = []secret.String{testAPIKey, testAPIKey + "-old"}
		cfg.Sources = append(cfg.Sources, partner)
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

		partner := redacted["sources"].([]any)[2].(map[string]any)
		require.Equal(t, []any{map[string]any{"username": "partner-user", "password": "redacted"}}, partner["basic_auth"])
		require.Equal(t, "https://twilio:xxxxx@hooks.example.com/partner?x=1", partner["url"])
		require.Equal(t, "sha512", partner["algorithm"])
		require.Equal(t, []string{"203.0.113.7"}, partner["allow_ips"])
		hmac := partner["hmac"].(map[string]any)
		require.Equal(t, "2 redacted", hmac["api_keys"])
		require.Equal(t, "X-Api-Key", hmac["api_key_header"])
		require.Equal(t, []string{"10.0.0.0/8"}, redacted["receiver"].(map[string]any)["trusted_proxies"])
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
			"%s":             fmt.Sprintf("%s", cfg), //nolint:staticcheck // S1025: the %s verb is the case under test
			"SourceValue%+v": fmt.Sprintf("%+v", cfg.Sources[0]),
			"Source%#v":      fmt.Sprintf("%#v", cfg.Sources),
			"Database%+v":    fmt.Sprintf("%+v", cfg.Database),
			"Database%#v":    fmt.Sprintf("%#v", cfg.Database),
			"BasicAuth%v":    fmt.Sprintf("%v", cfg.Sources[2].BasicAuth),
			"BasicAuth%+v":   fmt.Sprintf("%+v", cfg.Sources[2].BasicAuth[0]),
			"BasicAuth%#v":   fmt.Sprintf("%#v", cfg.Sources[2].BasicAuth),
			"HMAC%+v":        fmt.Sprintf("%+v", cfg.Sources[2].HMAC),
			"HMAC%#v":        fmt.Sprintf("%#v", cfg.Sources[2].HMAC),
			"slog":           slogOut.String(),
		} {
			require.NotContains(t, out, testSecret, name)
			require.NotContains(t, out, testDatabasePassword, name)
			require.NotContains(t, out, testPassword, name)
			require.NotContains(t, out, testAPIKey, name)
			require.True(t, strings.Contains(out, "redacted") || strings.Contains(out, "xxxxx"), name)
		}
	})

	t.Run("OwnersConfigsHideSecrets", func(t *testing.T) {
		t.Parallel()

		// The secrets reach their owners' Configs as secret types, revealed
		// only where they are used: printing those Configs shows none.
		cfg := setup()
		cfg.Worker.Admin.Token = testAPIKey
		cfg.Tracing.Headers = map[string]secret.String{"authorization": testPassword}
		cfg.Worker.Destinations = map[string]DestinationConfig{"bank": {Kind: DestinationHTTP, URL: "https://bank.example.com/hooks", Secret: testSecret}}
		httpDest := relay.HTTPConfig{URL: cfg.Worker.Destinations["bank"].URL.Reveal(), Secret: cfg.Worker.Destinations["bank"].Secret}
		exporter := tracing.Config{ServiceName: "hookinbox-worker", OTLPEndpoint: "http://127.0.0.1:4318/v1/traces", Headers: cfg.Tracing.Headers}
		for name, out := range map[string]string{
			"Config%+v":         fmt.Sprintf("%+v", *cfg),
			"Worker%+v":         fmt.Sprintf("%+v", cfg.Worker),
			"Tracing%#v":        fmt.Sprintf("%#v", cfg.Tracing),
			"relay.HTTPConfig":  fmt.Sprintf("%+v", httpDest),
			"relay.HTTPConfig#": fmt.Sprintf("%#v", httpDest),
			"tracing.Config":    fmt.Sprintf("%+v", exporter),
			"tracing.Config#":   fmt.Sprintf("%#v", exporter),
			"admin token":       fmt.Sprintf("%v %s", cfg.Worker.Admin.Token, cfg.Worker.Admin.Token),
		} {
			require.NotContains(t, out, testSecret, name)
			require.NotContains(t, out, testPassword, name)
			require.NotContains(t, out, testAPIKey, name)
		}
	})

	t.Run("CoversEveryKey", func(t *testing.T) {
		t.Parallel()

		redacted := setup().Redacted()
		for _, key := range scalarKeys(reflect.TypeFor[Config]()) {
			path := strings.Split(key, ".")
			m := redacted
			for _, name := range path[:len(path)-1] {
				m = m[name].(map[string]any)
			}
			require.Contains(t, m, path[len(path)-1], key)
		}
		require.Contains(t, redacted["receiver"], "trusted_proxies")
		require.Contains(t, redacted["worker"], "queues")
		require.Contains(t, redacted["worker"], "routes")

		source := redacted["sources"].([]any)[2].(map[string]any)
		route := redacted["worker"].(map[string]any)["routes"].([]any)[0].(map[string]any)
		require.ElementsMatch(t, tagNames(reflect.TypeFor[SourceConfig]()), mapKeys(source))
		require.ElementsMatch(t, tagNames(reflect.TypeFor[BasicAuthConfig]()), mapKeys(source["basic_auth"].([]any)[0].(map[string]any)))
		require.ElementsMatch(t, tagNames(reflect.TypeFor[HMACConfig]()), mapKeys(source["hmac"].(map[string]any)))
		require.ElementsMatch(t, tagNames(reflect.TypeFor[worker.Route]()), mapKeys(route))
	})
}

// testPassword and testAPIKey must never appear in a log either.
const (
	testPassword = "BasicPW-must-not-leak"
	testAPIKey   = "APIKEY-must-not-leak"
)

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
