package config

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// envRef matches the only expanded form, ${NAME}. A bare $NAME or a lone $
// is left alone, since secrets may contain $.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} in every string of c, slices, maps' values and
// sources included, with lookup(NAME). A reference to an unset variable is a problem
// naming the key, never the value.
func (c *Config) expandEnv(lookup func(string) (string, bool), p *problems) {
	keys := c.sourceKeys() // Taken before the names are expanded.
	v := reflect.ValueOf(c).Elem()
	for _, f := range settingFields(v.Type()) {
		switch name := tagName(f); name {
		case "sources":
			for j := range c.Sources {
				expandValue(reflect.ValueOf(&c.Sources[j]).Elem(), keys[j], lookup, p)
			}
		default:
			expandValue(v.FieldByIndex(f.Index), name, lookup, p)
		}
	}
}

func expandValue(v reflect.Value, key string, lookup func(string) (string, bool), p *problems) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(expandString(v.String(), key, lookup, p))
	case reflect.Struct:
		for _, f := range settingFields(v.Type()) {
			name := tagName(f)
			if key != "" {
				name = key + "." + name
			}
			expandValue(v.FieldByIndex(f.Index), name, lookup, p)
		}
	case reflect.Pointer:
		if !v.IsNil() && v.Elem().Kind() == reflect.Struct {
			expandValue(v.Elem(), key, lookup, p)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			expandValue(v.Index(i), key+"["+strconv.Itoa(i)+"]", lookup, p)
		}
	case reflect.Map:
		// A map's values are not addressable: each is expanded in a copy
		// and stored back. A map of structs is keyed like a section
		// (worker.destinations.billing.secret), a map of strings like an
		// entry (tracing.headers[Authorization]).
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		for _, k := range v.MapKeys() {
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(v.MapIndex(k))
			name := key + "[" + k.String() + "]"
			if elem.Kind() == reflect.Struct {
				name = key + "." + k.String()
			}
			expandValue(elem, name, lookup, p)
			v.SetMapIndex(k, elem)
		}
	default:
		// Numbers and durations hold no references.
	}
}

func expandString(s, key string, lookup func(string) (string, bool), p *problems) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		value, ok := lookup(name)
		if !ok {
			p.addf(key, "environment variable %s is not set", name)
		}
		return value
	})
}
