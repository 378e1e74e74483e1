package config_test

import (
	"cmp"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

const examplePath = "../../config/hookinbox.yaml"

// exampleEnv holds a value for every ${NAME} the example references, each
// in the form its provider accepts.
var exampleEnv = map[string]string{
	"DATABASE_URL":             "postgres://hookinbox:pw@localhost:5432/hookinbox",
	"STRIPE_WEBHOOK_SECRET":    "whsec_stripe",
	"SHOPIFY_WEBHOOK_SECRET":   "shpss_shopify",
	"BANK_WEBHOOK_SECRET":      "whsec_YmFuaw==",
	"SVIX_WEBHOOK_SECRET":      "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"GITHUB_WEBHOOK_SECRET":    "It's a Secret to Everybody",
	"SQUARE_SIGNATURE_KEY":     "Ibxx_5AKakO-3qeNVR61Dw",
	"PADDLE_WEBHOOK_SECRET":    "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr",
	"SLACK_SIGNING_SECRET":     "8f742231b10e8888abcd99yyyzzz85a5",
	"MARQETA_WEBHOOK_PASSWORD": "Marqeta-Passw0rd-1234!",
	"MARQETA_WEBHOOK_SECRET":   "marqeta-hmac-secret",
	"ADYEN_HMAC_KEY":           "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00",
	"ADYEN_WEBHOOK_PASSWORD":   "adyen-password",
	"TWILIO_AUTH_TOKEN":        "12345",
	"PARTNER_WEBHOOK_SECRET":   "partner-secret",
	"PARTNER_API_KEY":          "partner-api-key",
	"BILLING_WEBHOOK_SECRET":   "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
}

// TestExampleFile keeps config/hookinbox.yaml loadable and valid. A source
// whose provider is not registered yet (the catalogue grows one provider at
// a time) is left out with a log line; once every provider is registered,
// every source is loaded and validated. It sets environment variables, so
// it is serial.
func TestExampleFile(t *testing.T) {
	for name, value := range exampleEnv {
		t.Setenv(name, value)
	}

	data, err := os.ReadFile(examplePath)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, registeredSourcesOnly(t, data), 0o600))

	cfg, err := config.Load(path, config.NeedDatabase|config.NeedReceiver|config.NeedWorker)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())

	require.Equal(t, exampleEnv["DATABASE_URL"], cfg.Database.URL.Reveal())
	require.Empty(t, cfg.Receiver.TrustedProxies)
	stripe, ok := cfg.Source("stripe")
	require.True(t, ok)
	require.Equal(t, []string{"whsec_stripe"}, secret.Reveal(stripe.Secrets))
	require.Nil(t, stripe.TwinTypes, "the example keeps the default twin types")
	bank, ok := cfg.Source("bank")
	require.True(t, ok)
	require.Equal(t, "standardwebhooks", bank.Provider)
	require.Equal(t, 90*time.Second, cfg.Worker.RescueAfter)
	require.Equal(t, []worker.Route{
		{Source: "stripe", Types: []string{"payment_intent.*"}, Handlers: []string{"log"}},
		{Source: "stripe", Types: []string{"customer.*"}, Handlers: []string{"mirror"}, Isolation: "read_committed",
			Mirror:   &effect.Spec{Kind: "data.object.object", ID: "data.object.id", Version: "created", EventTime: "created", Tie: "arrival"},
			Lock:     &worker.LockOption{Key: "data.object.id", Snooze: time.Second},
			Sequence: &worker.SequenceOption{Key: "data.object.id", Order: "created", PoisonAfter: 3}},
		{Source: "stripe", Types: []string{"invoice.*"}, Handlers: []string{"forward"},
			Filter: []worker.Condition{{Path: "data.object.currency", In: []string{"usd", "eur"}}}, Destinations: []string{"billing"}},
		{Source: "*", Types: []string{"*"}, Handlers: []string{"noop"}},
	}, cfg.Worker.Routes)
	require.Equal(t, exampleEnv["BILLING_WEBHOOK_SECRET"], cfg.Worker.Destinations["billing"].Secret.Reveal())

	// github and slack leave their limits to the provider presets.
	for _, name := range []string{"github", "slack"} {
		source, ok := cfg.Source(name)
		if !ok {
			continue
		}
		preset, _ := provider.PresetFor(source.Provider)
		require.Equal(t, cmp.Or(preset.MaxBodyBytes, cfg.Receiver.MaxBodyBytes), source.MaxBodyBytes, name)
		require.Equal(t, cmp.Or(preset.AckTimeout, cfg.Receiver.AckTimeout), source.AckTimeout, name)
	}
	if marqeta, ok := cfg.Source("marqeta"); ok {
		require.Equal(t, []config.BasicAuthConfig{{Username: "hookinbox", Password: secret.String(exampleEnv["MARQETA_WEBHOOK_PASSWORD"])}}, marqeta.BasicAuth)
	}
	if partner, ok := cfg.Source("partner"); ok {
		require.Equal(t, []secret.String{secret.String(exampleEnv["PARTNER_API_KEY"])}, partner.HMAC.APIKeys)
	}
}

// registeredSourcesOnly returns the YAML document data without the sources
// whose provider is not registered.
func registeredSourcesOnly(t *testing.T, data []byte) []byte {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &doc))
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "sources" {
			continue
		}
		list := root.Content[i+1]
		kept := list.Content[:0]
		for _, source := range list.Content {
			var s struct{ Name, Provider string }
			require.NoError(t, source.Decode(&s))
			if _, ok := provider.PresetFor(s.Provider); !ok {
				t.Logf("skipping example source %q: provider %q is not registered yet", s.Name, s.Provider)
				continue
			}
			kept = append(kept, source)
		}
		list.Content = kept
	}
	out, err := yaml.Marshal(&doc)
	require.NoError(t, err)
	return out
}

// TestExampleFileHasASourcePerProvider keeps the example a catalogue: every
// registered provider is shown by some source.
func TestExampleFileHasASourcePerProvider(t *testing.T) {
	t.Parallel()

	data, err := os.ReadFile(examplePath)
	require.NoError(t, err)
	var file struct {
		Sources []struct{ Provider string }
	}
	require.NoError(t, yaml.Unmarshal(data, &file))
	shown := map[string]bool{}
	for _, source := range file.Sources {
		shown[source.Provider] = true
	}
	for _, name := range provider.Names() {
		require.True(t, shown[name], "config/hookinbox.yaml has no source with provider %q", name)
	}
}

// TestExampleFileMentionsEveryKey keeps the example complete as fields are
// added: every key outside lists is set, and every key of a list entry
// (sources[], sources[].basic_auth[], sources[].hmac, worker.routes[]) is
// set by some entry or shown in a comment ("# secrets_file: …").
func TestExampleFileMentionsEveryKey(t *testing.T) {
	t.Parallel()

	data, err := os.ReadFile(examplePath)
	require.NoError(t, err)
	var file map[string]any
	require.NoError(t, yaml.Unmarshal(data, &file))

	// walk checks typ's fields in nodes. strict: each node must set each
	// field; otherwise some node must set it, or a comment show it.
	var walk func(typ reflect.Type, nodes []map[string]any, key string, strict bool)
	walk = func(typ reflect.Type, nodes []map[string]any, key string, strict bool) {
		for i := range typ.NumField() {
			field := typ.Field(i)
			if !field.IsExported() {
				continue // Not a key: Load's warnings.
			}
			name := field.Tag.Get("mapstructure")
			if field.Anonymous && name == ",squash" {
				walk(field.Type, nodes, key, strict) // Its keys sit at this level.
				continue
			}
			if name == "-" {
				continue // Set in code, not a key.
			}
			var values []any
			for _, node := range nodes {
				if value, ok := node[name]; ok {
					values = append(values, value)
				}
			}
			if strict {
				require.Len(t, values, len(nodes), "%s%s is missing", key, name)
			} else {
				require.True(t, len(values) > 0 || strings.Contains(string(data), "# "+name+":"),
					"no entry sets or shows %s%s", key, name)
			}

			var children []map[string]any
			switch {
			case field.Type.Kind() == reflect.Struct:
				for _, value := range values {
					children = append(children, value.(map[string]any))
				}
				walk(field.Type, children, key+name+".", strict)
			case field.Type.Kind() == reflect.Slice && field.Type.Elem().Kind() == reflect.Struct:
				for _, value := range values {
					for _, entry := range value.([]any) {
						children = append(children, entry.(map[string]any))
					}
				}
				walk(field.Type.Elem(), children, key+name+"[].", false)
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), []map[string]any{file}, "", true)
}
