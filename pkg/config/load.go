package config

import (
	"fmt"
	"strings"

	"github.com/spf13/viper"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

// envPrefix prefixes the environment variables that override scalar keys:
// the key receiver.max_body_bytes is overridden by
// HOOKINBOX_RECEIVER_MAX_BODY_BYTES, database.url by HOOKINBOX_DATABASE_URL.
const envPrefix = "HOOKINBOX"

// PathEnv names the environment variable Load reads the config file's path
// from when it is given an empty path.
const PathEnv = "HOOKINBOX_CONFIG"

// databaseURLEnv is the conventional environment variable Load falls back to
// when neither HOOKINBOX_DATABASE_URL nor database.url is set.
const databaseURLEnv = "DATABASE_URL"

// Load reads the configuration, applies defaults and validates what needs
// names (see Needs): a command is refused only for the settings it uses. It
// is the only place in the project that touches viper.
//
// path names a YAML file; if it is empty Load uses $HOOKINBOX_CONFIG, and if
// that is empty too it reads no file and relies on the environment and the
// defaults. Every scalar key may be overridden by HOOKINBOX_<SECTION>_<KEY>
// (see envVar); slices (sources, routes, queues) come from the file only.
// The database URL is taken from HOOKINBOX_DATABASE_URL, then database.url,
// then DATABASE_URL.
//
// A key the structs do not have is an error, as is a duration without a
// unit ("4" rather than "4s"). Every string value, from the file or from a
// HOOKINBOX_* variable, may reference the environment as ${NAME}; only that
// braced form is expanded, so a literal $ elsewhere stays. A reference to an
// unset variable is an error naming the key. Secrets listed in a source's
// secrets_file are then appended to its secrets (taken literally), defaults
// are applied (see ApplyDefaults) and the result is validated.
//
// Every problem is reported at once, one a line, each under its key: a
// source by its name (sources[stripe].secrets[0]), and a key set by a
// HOOKINBOX_* variable under that variable. A HOOKINBOX_* variable that
// matches no key is not an error but a warning, returned by the Config's
// Warnings for the caller to log.
func Load(path string, needs Needs) (*Config, error) {
	return load(path, needs, osEnvironment())
}

// load is Load reading env instead of the process environment.
func load(path string, needs Needs, env environment) (*Config, error) {
	if path == "" {
		path, _ = env.lookup(PathEnv)
	}
	settings, err := readSettings(path)
	if err != nil {
		return nil, err
	}

	var p problems
	cfg := &Config{}
	vars := env.overrides()
	skip := make(map[string]bool, len(vars))
	for key := range vars {
		skip[key] = true
	}
	decodeSettings(settings, cfg, skip, &p)
	env.applyOverrides(cfg, vars, &p)
	// A variable the file references is used, whatever its name.
	referenced := map[string]bool{}
	cfg.expandEnv(func(name string) (string, bool) {
		referenced[name] = true
		return env.lookup(name)
	}, &p)
	// Below both HOOKINBOX_DATABASE_URL and database.url. Taken literally:
	// it is not subject to ${NAME} expansion.
	if cfg.Database.URL == "" {
		url, _ := env.lookup(databaseURLEnv)
		cfg.Database.URL = secret.URL(url)
	}
	if needs.verifies() {
		cfg.readSecretsFiles(&p)
	}
	read := len(p)

	cfg.ApplyDefaults()
	cfg.validate(&p)
	cfg.demand(needs, &p)
	cfg.warnings = env.warnings(referenced)
	if needs.verifies() {
		for i := range cfg.Sources {
			cfg.warnings = append(cfg.warnings, cfg.Sources[i].SecretWarnings()...)
		}
	}

	if err := report(p, read, needs, vars); err != nil {
		return nil, fmt.Errorf("config: invalid configuration, read from %s:\n%w", describe(path), err)
	}
	return cfg, nil
}

// Warnings returns what Load noticed but did not refuse, one message each:
// a HOOKINBOX_* environment variable that matches no key, is not referenced
// by the file as ${NAME} and is not documented (HOOKINBOX_ADMIN_TOKEN), and
// so is ignored; a source's signing secret with another credential's shape
// (see SourceConfig.SecretWarnings). A Config not made by Load has none.
func (c *Config) Warnings() []string { return c.warnings }

// demand adds what needs requires beyond valid values: a receiver serves at
// least one source, and a worker routes by at least one route.
func (c *Config) demand(needs Needs, p *problems) {
	if needs&NeedReceiver != 0 && len(c.Sources) == 0 {
		p.addf("sources", "the receiver needs at least one source")
	}
	if needs&NeedWorker != 0 && len(c.Worker.Routes) == 0 {
		p.addf("worker.routes", "the worker needs at least one route (with none, every event is unrouted)")
	}
}

// report joins the problems a command must hear of: those about the file's
// shape, and those in the parts it needs. A key whose value could not be
// read (the first read problems: not decodable, an unset ${NAME}) is
// reported once, not again by the checks that follow, and a key set by a
// variable is reported under that variable.
func report(p problems, read int, needs Needs, vars map[string]string) error {
	unreadable := map[string]bool{}
	for _, pr := range p[:read] {
		unreadable[pr.key] = true
	}
	var out problems
	for i, pr := range p {
		if (!pr.shape && !needs.covers(pr.judgedBy())) || (i >= read && unreadable[pr.key]) {
			continue
		}
		if name, ok := vars[pr.key]; ok {
			pr = &problem{key: name + " (" + pr.key + ")", err: pr.err}
		}
		out = append(out, pr)
	}
	return out.join()
}

// readSettings reads the file at path into nested maps; no path, no
// settings.
func readSettings(path string) (map[string]any, error) {
	if path == "" {
		return map[string]any{}, nil
	}
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	return v.AllSettings(), nil
}

// envVar returns the environment variable that overrides the scalar key, e.g.
// "worker.concurrency" → "HOOKINBOX_WORKER_CONCURRENCY".
func envVar(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func describe(path string) string {
	if path == "" {
		return "the environment (no config file)"
	}
	return path + " and the environment"
}
