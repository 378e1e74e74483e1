package config_test

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hookinbox/hookinbox/pkg/config"
)

const examplePath = "../../config/hookinbox.yaml"

// TestExampleFile keeps config/hookinbox.yaml loadable. It sets environment
// variables, so it is serial.
func TestExampleFile(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://hookinbox:pw@localhost:5432/hookinbox")
	t.Setenv("STRIPE_WEBHOOK_SECRET", "whsec_stripe")
	t.Setenv("SHOPIFY_WEBHOOK_SECRET", "shpss_shopify")
	t.Setenv("BANK_WEBHOOK_SECRET", "whsec_YmFuaw==")

	cfg, err := config.Load(examplePath)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())

	require.Equal(t, "postgres://hookinbox:pw@localhost:5432/hookinbox", cfg.Database.URL)
	stripe, ok := cfg.Source("stripe")
	require.True(t, ok)
	require.Equal(t, []string{"whsec_stripe"}, stripe.Secrets)
	bank, ok := cfg.Source("bank")
	require.True(t, ok)
	require.Equal(t, "standardwebhooks", bank.Provider)
	require.Equal(t, 90*time.Second, cfg.Worker.RescueAfter)
	require.Equal(t, []config.RouteConfig{
		{Source: "stripe", Types: []string{"payment_intent.*"}, Handlers: []string{"log"}},
		{Source: "*", Types: []string{"*"}, Handlers: []string{"noop"}},
	}, cfg.Worker.Routes)
}

// TestExampleFileMentionsEveryKey keeps the example complete as fields are
// added: every scalar key is set, and every source and route key is set by
// some entry or, for secrets_file, shown in a comment.
func TestExampleFileMentionsEveryKey(t *testing.T) {
	t.Parallel()

	data, err := os.ReadFile(examplePath)
	require.NoError(t, err)
	var file map[string]any
	require.NoError(t, yaml.Unmarshal(data, &file))

	var walk func(typ reflect.Type, node map[string]any, key string)
	walk = func(typ reflect.Type, node map[string]any, key string) {
		for i := range typ.NumField() {
			field := typ.Field(i)
			name := field.Tag.Get("mapstructure")
			value, ok := node[name]
			switch field.Type.Kind() {
			case reflect.Struct:
				require.True(t, ok, "%s%s is missing", key, name)
				walk(field.Type, value.(map[string]any), key+name+".")
			case reflect.Slice:
				if field.Type.Elem().Kind() != reflect.Struct {
					require.True(t, ok, "%s%s is missing", key, name)
					continue
				}
				seen := map[string]bool{}
				for _, entry := range value.([]any) {
					for k := range entry.(map[string]any) {
						seen[k] = true
					}
				}
				for j := range field.Type.Elem().NumField() {
					sub := field.Type.Elem().Field(j).Tag.Get("mapstructure")
					require.True(t, seen[sub] || strings.Contains(string(data), "# "+sub+":"),
						"no %s%s[] entry sets or shows %s", key, name, sub)
				}
			default:
				require.True(t, ok, "%s%s is missing", key, name)
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), file, "")
}

func ExampleEnvVar() {
	fmt.Println(config.EnvVar("receiver.max_body_bytes"))
	fmt.Println(config.EnvVar("worker.concurrency"))
	// Output:
	// HOOKINBOX_RECEIVER_MAX_BODY_BYTES
	// HOOKINBOX_WORKER_CONCURRENCY
}

func ExampleRedactDatabaseURL() {
	fmt.Println(config.RedactDatabaseURL("postgres://app:s3cret@db:5432/hookinbox"))
	fmt.Println(config.RedactDatabaseURL("host=db user=app password=s3cret"))
	// Output:
	// postgres://app:xxxxx@db:5432/hookinbox
	// host=db user=app password=xxxxx
}
