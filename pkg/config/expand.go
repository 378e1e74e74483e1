package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// envRef matches the only expanded form, ${NAME}. A bare $NAME or a lone $
// is left alone, since secrets may contain $.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} in every string of c, slices and sources
// included, with lookup(NAME). A reference to an unset variable is an error
// naming the key, never the value.
func (c *Config) expandEnv(lookup func(string) (string, bool)) error {
	var errs []error
	expandValue(reflect.ValueOf(c).Elem(), "", lookup, &errs)
	return errors.Join(errs...)
}

func expandValue(v reflect.Value, key string, lookup func(string) (string, bool), errs *[]error) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(expandString(v.String(), key, lookup, errs))
	case reflect.Struct:
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("mapstructure"), ",")
			if name == "" || name == "-" {
				continue
			}
			if key != "" {
				name = key + "." + name
			}
			expandValue(v.Field(i), name, lookup, errs)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			expandValue(v.Index(i), key+"["+strconv.Itoa(i)+"]", lookup, errs)
		}
	default:
		// Numbers and durations hold no references.
	}
}

func expandString(s, key string, lookup func(string) (string, bool), errs *[]error) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		value, ok := lookup(name)
		if !ok {
			*errs = append(*errs, fmt.Errorf("%s: environment variable %s is not set", key, name))
		}
		return value
	})
}
