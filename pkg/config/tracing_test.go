package config

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

func TestTracing(t *testing.T) {
	t.Parallel()

	const apiKey = "otlp-key-must-not-leak"

	t.Run("OffByDefault", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML), everything&^NeedWorker, nil)
		require.NoError(t, err)
		require.False(t, cfg.Tracing.Enabled)
		require.Empty(t, cfg.Tracing.OTLPEndpoint)
		require.InDelta(t, 1.0, cfg.Tracing.SampleRatio, 0)
	})

	t.Run("HeadersAreExpandedAndRedacted", func(t *testing.T) {
		t.Parallel()

		yaml := minimalYAML + `
tracing:
  enabled: true
  otlp_endpoint: https://otlp.example.com/v1/traces
  sample_ratio: 0.25
  headers:
    Authorization: "Bearer ${OTLP_KEY}"
    x-tenant: ops
`
		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", yaml), NeedDatabase|NeedReceiver, map[string]string{"OTLP_KEY": apiKey})
		require.NoError(t, err)
		// YAML keys are read case-insensitively (HTTP header names are too).
		require.Equal(t, map[string]secret.String{"authorization": "Bearer " + apiKey, "x-tenant": "ops"}, cfg.Tracing.Headers)
		require.InDelta(t, 0.25, cfg.Tracing.SampleRatio, 0)
		require.Contains(t, cfg.SecretValues(), "Bearer "+apiKey)
		require.Contains(t, cfg.SecretValues(), "ops")

		redacted := cfg.Redacted()["tracing"].(map[string]any)
		require.Equal(t, map[string]any{"authorization": "redacted", "x-tenant": "redacted"}, redacted["headers"])
		require.Equal(t, "https://otlp.example.com/v1/traces", redacted["otlp_endpoint"])
		for _, s := range []string{cfg.String(), fmt.Sprintf("%#v", *cfg), fmt.Sprintf("%+v", cfg.Tracing), fmt.Sprintf("%v", cfg.Tracing)} {
			require.NotContains(t, s, apiKey)
		}
	})

	t.Run("AnUnsetHeaderVariableIsNamedByItsKey", func(t *testing.T) {
		t.Parallel()

		yaml := minimalYAML + "tracing: {enabled: true, otlp_endpoint: http://collector:4318/v1/traces, headers: {authorization: \"${OTLP_KEY}\"}}\n"
		_, err := loadIn(writeFile(t, "hookinbox.yaml", yaml), NeedDatabase|NeedWorker|NeedReceiver, nil)
		require.ErrorContains(t, err, "tracing.headers[authorization]: environment variable OTLP_KEY is not set")
	})

	t.Run("RefusesBadSettingsByKey", func(t *testing.T) {
		t.Parallel()

		for tracing, want := range map[string]string{
			"{enabled: true}": "tracing.otlp_endpoint: required when tracing.enabled is true",
			"{enabled: true, otlp_endpoint: collector:4318}":                         "tracing.otlp_endpoint: must be an absolute http:// or https:// URL",
			"{enabled: true, otlp_endpoint: http://collector:4318}":                  "tracing.otlp_endpoint: must be the full URL of the traces endpoint, path included (nothing is appended): http://collector:4318/v1/traces",
			"{enabled: true, otlp_endpoint: \"https://u:p@collector/v1/traces\"}":    "tracing.otlp_endpoint: must not hold credentials",
			"{enabled: true, otlp_endpoint: http://c/v1/traces, sample_ratio: 1.5}":  "tracing.sample_ratio: must be greater than 0 and at most 1, not 1.5",
			"{enabled: true, otlp_endpoint: http://c/v1/traces, sample_ratio: -0.1}": "tracing.sample_ratio: must be greater than 0 and at most 1, not -0.1",
			"{headers: {\"bad header\": x}}":                                         `tracing.headers: "bad header" is not a valid HTTP header name`,
		} {
			_, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML+"tracing: "+tracing+"\n"), NeedDatabase|NeedReceiver, nil)
			require.ErrorContains(t, err, want, tracing)
		}
	})

	t.Run("OffNeedsNoEndpoint", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML+"tracing: {enabled: false, sample_ratio: 0.5}\n"), NeedDatabase|NeedReceiver, nil)
		require.NoError(t, err)
		require.False(t, cfg.Tracing.Enabled)
	})

	t.Run("OnlyTheDaemonsNeedIt", func(t *testing.T) {
		t.Parallel()

		// inboxctl migrate does not export spans: a broken tracing section
		// does not stop it.
		path := writeFile(t, "hookinbox.yaml", minimalYAML+"tracing: {enabled: true}\n")
		_, err := loadIn(path, NeedDatabase, nil)
		require.NoError(t, err)
		_, err = loadIn(path, NeedDatabase|NeedWorker, nil)
		require.ErrorContains(t, err, "tracing.otlp_endpoint")
	})

	t.Run("EnvironmentOverridesScalars", func(t *testing.T) {
		t.Parallel()

		cfg, err := loadIn(writeFile(t, "hookinbox.yaml", minimalYAML), NeedDatabase|NeedReceiver, map[string]string{
			"HOOKINBOX_TRACING_ENABLED": "true", "HOOKINBOX_TRACING_OTLP_ENDPOINT": "http://127.0.0.1:4318/v1/traces",
		})
		require.NoError(t, err)
		require.True(t, cfg.Tracing.Enabled)
		require.Equal(t, "http://127.0.0.1:4318/v1/traces", cfg.Tracing.OTLPEndpoint.Reveal())
	})
}
