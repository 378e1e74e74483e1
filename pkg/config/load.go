package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// EnvPrefix prefixes the environment variables that override scalar keys:
// the key receiver.max_body_bytes is overridden by
// HOOKINBOX_RECEIVER_MAX_BODY_BYTES, database.url by HOOKINBOX_DATABASE_URL.
const EnvPrefix = "HOOKINBOX"

// PathEnv names the environment variable Load reads the config file's path
// from when it is given an empty path.
const PathEnv = "HOOKINBOX_CONFIG"

// DatabaseURLEnv is the conventional environment variable Load falls back to
// when neither HOOKINBOX_DATABASE_URL nor database.url is set.
const DatabaseURLEnv = "DATABASE_URL"

// Load reads the configuration, applies defaults and validates it. It is the
// only place in the project that touches viper.
//
// path names a YAML file; if it is empty Load uses $HOOKINBOX_CONFIG, and if
// that is empty too it reads no file and relies on the environment and the
// defaults. Every scalar key may be overridden by HOOKINBOX_<SECTION>_<KEY>
// (see EnvVar); slices (sources, routes, queues) come from the file only.
// The database URL is taken from HOOKINBOX_DATABASE_URL, then database.url,
// then DATABASE_URL.
//
// A key the structs do not have is an error, as is a duration without a
// unit ("4" rather than "4s"). Every string value, from the file or from a
// HOOKINBOX_* variable, may reference the environment as ${NAME}; only that
// braced form is expanded, so a literal $ elsewhere stays. A reference to an
// unset variable is an error naming the key. Secrets listed in a source's
// secrets_file are then appended to its secrets (taken literally), defaults
// are applied (see ApplyDefaults) and the result is validated (see Validate).
func Load(path string) (*Config, error) {
	path = cmp.Or(path, os.Getenv(PathEnv))

	v, err := newViper(path)
	if err != nil {
		return nil, err
	}

	cfg := &Config{}
	if err := v.UnmarshalExact(cfg, viper.DecodeHook(durationHook)); err != nil {
		return nil, fmt.Errorf("config: decoding %s: %w", describe(path), err)
	}

	if err := cfg.expandEnv(os.LookupEnv); err != nil {
		return nil, fmt.Errorf("config: expanding ${NAME} in %s:\n%w", describe(path), err)
	}

	// Below both HOOKINBOX_DATABASE_URL (bound by newViper) and database.url.
	// Taken literally: it is not subject to ${NAME} expansion.
	cfg.Database.URL = cmp.Or(cfg.Database.URL, os.Getenv(DatabaseURLEnv))

	if err := cfg.readSecretsFiles(); err != nil {
		return nil, fmt.Errorf("config: reading secrets files:\n%w", err)
	}

	cfg.ApplyDefaults()

	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: invalid configuration in %s:\n%w", describe(path), err)
	}
	return cfg, nil
}

// EnvVar returns the environment variable that overrides the scalar key, e.g.
// "worker.concurrency" → "HOOKINBOX_WORKER_CONCURRENCY".
func EnvVar(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// newViper returns a viper that knows every scalar key of Config, so an
// environment override applies even to a key the file does not mention.
func newViper(path string) (*viper.Viper, error) {
	v := viper.New()
	// Each scalar key is bound explicitly; AutomaticEnv is left off because
	// it would also let a variable replace a list (sources, routes, queues)
	// with a single string.
	for _, key := range scalarKeys(reflect.TypeFor[Config](), "") {
		if err := v.BindEnv(key, EnvVar(key)); err != nil {
			return nil, fmt.Errorf("config: binding %s: %w", key, err)
		}
	}

	if path == "" {
		return v, nil
	}
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	return v, nil
}

// scalarKeys lists the dotted keys of t's non-slice leaf fields, from their
// mapstructure tags, so the list of overridable keys never drifts from the
// structs.
func scalarKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		field := t.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("mapstructure"), ",")
		if name == "" || name == "-" {
			continue
		}
		switch field.Type.Kind() {
		case reflect.Struct:
			keys = append(keys, scalarKeys(field.Type, prefix+name+".")...)
		case reflect.Slice, reflect.Array, reflect.Map:
			// Come from the file only.
		default:
			keys = append(keys, prefix+name)
		}
	}
	return keys
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook decodes "4s"-style strings into time.Duration, and refuses a
// bare number, which would otherwise silently decode as nanoseconds.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		if data.(string) == "" {
			return time.Duration(0), nil
		}
		return time.ParseDuration(data.(string))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return nil, fmt.Errorf("must be a duration with a unit such as \"30s\" or \"5m\", not the bare number %v", data)
	default:
		return data, nil
	}
}

var _ mapstructure.DecodeHookFuncType = durationHook

// readSecretsFiles appends each source's secrets_file to its secrets.
func (c *Config) readSecretsFiles() error {
	var errs []error
	for i := range c.Sources {
		source := &c.Sources[i]
		if source.SecretsFile == "" {
			continue
		}
		secrets, err := readSecretsFile(source.SecretsFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("sources[%d].secrets_file: %w", i, err))
			continue
		}
		source.Secrets = append(source.Secrets, secrets...)
	}
	return errors.Join(errs...)
}

// readSecretsFile returns the secrets in the file name: one a line, trimmed,
// skipping blank lines and lines starting with #.
func readSecretsFile(name string) ([]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err // *fs.PathError names the file, never its content.
	}
	var secrets []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		secrets = append(secrets, line)
	}
	return secrets, nil
}

func describe(path string) string {
	if path == "" {
		return "environment (no config file)"
	}
	return path
}
