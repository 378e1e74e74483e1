package config

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
)

// environment is what Load reads from the process environment. Tests inject
// their own, so that they can run in parallel.
type environment struct {
	// lookup returns a variable's value, as os.LookupEnv does.
	lookup func(name string) (string, bool)
	// environ lists NAME=value entries, as os.Environ does; Load warns
	// about each HOOKINBOX_* name in it that matches no key.
	environ []string
}

func osEnvironment() environment {
	return environment{lookup: os.LookupEnv, environ: os.Environ()}
}

// overrides returns the scalar keys that HOOKINBOX_* variables override,
// each with its variable. A variable set to "" overrides nothing.
func (env environment) overrides() map[string]string {
	vars := map[string]string{}
	for _, key := range scalarKeys(reflect.TypeFor[Config]()) {
		if value, ok := env.lookup(envVar(key)); ok && value != "" {
			vars[key] = envVar(key)
		}
	}
	return vars
}

// applyOverrides sets each overridden key of cfg from its variable,
// reporting a bad value under the key (Load names the variable).
func (env environment) applyOverrides(cfg *Config, vars map[string]string, p *problems) {
	for _, key := range slices.Sorted(maps.Keys(vars)) {
		value, _ := env.lookup(vars[key])
		if err := decodeValue(fieldByKey(cfg, key), value); err != nil {
			p.add(key, err)
		}
	}
}

// documentedVariables are HOOKINBOX_* variables the docs tell operators to
// set that are no key's override: the config references them as ${NAME}
// (worker.admin.token: "${HOOKINBOX_ADMIN_TOKEN}"). A process may have one
// without referencing it (the receiver, given the worker's Secret).
var documentedVariables = []string{"HOOKINBOX_ADMIN_TOKEN"}

// warnings returns a warning for each HOOKINBOX_* variable that matches no
// key, is not referenced (names the file's ${NAME} references) and is not
// documented: a misspelt override is otherwise silently ignored.
func (env environment) warnings(referenced map[string]bool) []string {
	scalars, lists := settingKeys(reflect.TypeFor[Config](), "")
	known := map[string]bool{PathEnv: true}
	for _, name := range documentedVariables {
		known[name] = true
	}
	for name := range referenced {
		known[name] = true
	}
	var names []string
	for _, key := range scalars {
		known[envVar(key)] = true
		names = append(names, envVar(key))
	}
	listVars := map[string]string{}
	for _, key := range lists {
		listVars[envVar(key)] = key
	}

	var warnings []string
	for _, entry := range env.environ {
		name, _, _ := strings.Cut(entry, "=")
		if !strings.HasPrefix(name, envPrefix+"_") || known[name] {
			continue
		}
		msg := fmt.Sprintf("%s matches no config key, so it is ignored", name)
		if key, ok := listVars[name]; ok {
			msg += fmt.Sprintf(" (%s is a list, which comes from the config file only)", key)
		} else if near, ok := nearest(name, names); ok {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
		warnings = append(warnings, msg)
	}
	slices.Sort(warnings)
	return slices.Compact(warnings)
}
