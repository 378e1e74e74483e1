package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// TestMain unsets the variables Load reads, so that a developer's or CI's
// HOOKINBOX_* or DATABASE_URL cannot change what the tests of Load itself
// see. Most tests call load with an environment of their own (loadIn), and
// so run in parallel; the few that set variables use t.Setenv and so run
// serially. A goroutine left running by a test fails the package.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix+"_") || name == databaseURLEnv {
			os.Unsetenv(name)
		}
	}
	goleak.VerifyTestMain(m)
}

// everything is what the receiver and the worker need together: every
// section checked, at least one source and one route demanded.
const everything = NeedDatabase | NeedReceiver | NeedWorker

// loadIn loads path with needs, reading env instead of the process
// environment, so that tests stay parallel.
func loadIn(path string, needs Needs, env map[string]string) (*Config, error) {
	return load(path, needs, mapEnvironment(env))
}

// mapEnvironment is an environment holding env's variables.
func mapEnvironment(env map[string]string) environment {
	var environ []string
	for name, value := range env {
		environ = append(environ, name+"="+value)
	}
	return environment{
		lookup: func(name string) (string, bool) {
			value, ok := env[name]
			return value, ok
		},
		environ: environ,
	}
}

// testSecret is a signing secret that must never appear in an error or a log.
const testSecret = "whsec_S3CRET-must-not-leak"

// testBankSecret is a valid Standard Webhooks secret (whsec_ and base64),
// from the specification's test vectors.
const testBankSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// testDatabasePassword must never appear in an error or a log either.
const testDatabasePassword = "PW-must-not-leak"

// minimalYAML is the smallest valid file.
const minimalYAML = `
database:
  url: postgres://hookinbox:` + testDatabasePassword + `@localhost:5432/hookinbox
sources:
  - name: stripe
    provider: stripe
    secrets: ["` + testSecret + `"]
`

// writeFile writes content to a file in t.TempDir and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// validConfig returns a defaulted Config that passes Validate.
func validConfig() *Config {
	cfg := &Config{
		Database: DatabaseConfig{URL: "postgres://hookinbox:" + testDatabasePassword + "@localhost:5432/hookinbox"},
		Sources: []SourceConfig{
			{Name: "stripe", Provider: "stripe", Secrets: []secret.String{testSecret}},
			{Name: "bank", Provider: "standardwebhooks", Secrets: []secret.String{testBankSecret}},
		},
		Worker: WorkerConfig{
			Config: worker.Config{Routes: []worker.Route{
				{Source: "stripe", Types: []string{"payment_intent.*"}, Handlers: []string{"log"}},
				{Source: "*", Handlers: []string{"noop"}},
			}},
		},
	}
	cfg.ApplyDefaults()
	return cfg
}
