package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// decodeSettings sets cfg from the file's settings key by key, so that every
// unknown key and every bad value is reported, each under its own key, and
// one mistake hides no other. Keys in skip (overridden by the environment)
// are left alone.
func decodeSettings(settings map[string]any, cfg *Config, skip map[string]bool, p *problems) {
	decodeStruct(reflect.ValueOf(cfg).Elem(), settings, "", skip, p)
}

func decodeStruct(v reflect.Value, settings map[string]any, prefix string, skip map[string]bool, p *problems) {
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		value := settings[name]
		key := prefix + name
		field, ok := fieldNamed(v, name)
		if !ok {
			unknownKey(p, key, name, v.Type())
			continue
		}
		switch {
		case value == nil || skip[key]:
			// Left out, or taken from the environment.
		case field.Kind() == reflect.Struct || isStructPointer(field.Type()):
			m, ok := value.(map[string]any)
			if !ok {
				p.addf(key, "must be a mapping of keys to values")
				continue
			}
			if field.Kind() == reflect.Pointer {
				// An optional section (a route's mirror, lock, sequence):
				// present once the file has it.
				field.Set(reflect.New(field.Type().Elem()))
				field = field.Elem()
			}
			decodeStruct(field, m, key+".", skip, p)
		case field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.Struct:
			decodeList(field, value, key, skip, p)
		case field.Kind() == reflect.Map && field.Type().Elem().Kind() == reflect.Struct:
			decodeMap(field, value, key, skip, p)
		default:
			if err := decodeValue(field, value); err != nil {
				p.add(key, err)
			}
		}
	}
}

// decodeList decodes a list of structs (sources, routes, basic_auth). A
// source is reported by its name, the others by their index.
func decodeList(field reflect.Value, value any, key string, skip map[string]bool, p *problems) {
	entries, ok := value.([]any)
	if !ok {
		p.addf(key, "must be a list")
		return
	}
	keys := make([]string, len(entries))
	for i := range entries {
		keys[i] = fmt.Sprintf("%s[%d]", key, i)
	}
	if key == "sources" {
		names := make([]string, len(entries))
		for i, entry := range entries {
			if m, ok := entry.(map[string]any); ok {
				names[i], _ = m["name"].(string)
			}
		}
		keys = sourceKeys(names)
	}
	field.Set(reflect.MakeSlice(field.Type(), len(entries), len(entries)))
	for i, entry := range entries {
		m, ok := entry.(map[string]any)
		if !ok {
			p.addf(keys[i], "must be a mapping of keys to values")
			continue
		}
		decodeStruct(field.Index(i), m, keys[i]+".", skip, p)
	}
}

// decodeMap decodes a mapping of names to structs (worker.destinations),
// each entry reported under its name ("worker.destinations.billing.url").
func decodeMap(field reflect.Value, value any, key string, skip map[string]bool, p *problems) {
	entries, ok := value.(map[string]any)
	if !ok {
		p.addf(key, "must be a mapping of names to settings")
		return
	}
	field.Set(reflect.MakeMapWithSize(field.Type(), len(entries)))
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		entryKey := key + "." + name
		m, ok := entries[name].(map[string]any)
		if !ok {
			p.addf(entryKey, "must be a mapping of keys to values")
			continue
		}
		entry := reflect.New(field.Type().Elem()).Elem()
		decodeStruct(entry, m, entryKey+".", skip, p)
		field.SetMapIndex(reflect.ValueOf(name), entry)
	}
}

// decodeValue decodes a scalar or a list of scalars into field, converting
// strings where needed (environment variables are strings).
func decodeValue(field reflect.Value, value any) error {
	decoder, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook:       durationHook,
		WeaklyTypedInput: true,
		Result:           field.Addr().Interface(),
	})
	if err != nil {
		return err
	}
	err = decoder.Decode(value)
	if de := (*mapstructure.DecodeError)(nil); errors.As(err, &de) {
		return de.Unwrap() // Its own name is "": the caller names the key.
	}
	return err
}

// isStructPointer reports whether t is a pointer to a struct, an optional
// section.
func isStructPointer(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct
}

// fieldNamed returns v's field whose mapstructure tag is name.
func fieldNamed(v reflect.Value, name string) (reflect.Value, bool) {
	for _, f := range settingFields(v.Type()) {
		if tagName(f) == name {
			return v.FieldByIndex(f.Index), true
		}
	}
	return reflect.Value{}, false
}

// settingFields returns t's fields that are keys (those with a mapstructure
// name), with the fields of a squashed embedded struct (worker.Config in
// WorkerConfig) in its place; each field's Index reaches it from t.
func settingFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && strings.HasSuffix(f.Tag.Get("mapstructure"), ",squash") {
			for _, inner := range settingFields(f.Type) {
				inner.Index = append([]int{i}, inner.Index...)
				out = append(out, inner)
			}
			continue
		}
		if name := tagName(f); name != "" && name != "-" {
			out = append(out, f)
		}
	}
	return out
}

// fieldByKey returns the field of *cfg that the dotted scalar key names.
func fieldByKey(cfg *Config, key string) reflect.Value {
	v := reflect.ValueOf(cfg).Elem()
	for name := range strings.SplitSeq(key, ".") {
		v, _ = fieldNamed(v, name)
	}
	return v
}

// unknownKey reports a key typ has no field for, suggesting the nearest one.
func unknownKey(p *problems, key, name string, typ reflect.Type) {
	var names []string
	for _, f := range settingFields(typ) {
		names = append(names, tagName(f))
	}
	msg := "unknown key"
	if near, ok := nearest(name, names); ok {
		msg += fmt.Sprintf(" (did you mean %s?)", near)
	}
	*p = append(*p, &problem{key: key, err: errors.New(msg), shape: true})
}

func tagName(field reflect.StructField) string {
	name, _, _ := strings.Cut(field.Tag.Get("mapstructure"), ",")
	return name
}

// scalarKeys lists the dotted keys of t's non-slice leaf fields, from their
// mapstructure tags, so the list of overridable keys never drifts from the
// structs.
func scalarKeys(t reflect.Type) []string {
	scalars, _ := settingKeys(t, "")
	return scalars
}

// settingKeys lists the dotted keys of t's scalar leaf fields and of its
// list (and map) fields.
func settingKeys(t reflect.Type, prefix string) (scalars, lists []string) {
	for _, f := range settingFields(t) {
		name := tagName(f)
		switch f.Type.Kind() {
		case reflect.Struct:
			s, l := settingKeys(f.Type, prefix+name+".")
			scalars, lists = append(scalars, s...), append(lists, l...)
		case reflect.Slice, reflect.Array, reflect.Map:
			lists = append(lists, prefix+name) // Come from the file only.
		default:
			scalars = append(scalars, prefix+name)
		}
	}
	return scalars, lists
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
		d, err := time.ParseDuration(data.(string))
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration such as \"30s\" or \"5m\"", data)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return nil, fmt.Errorf("must be a duration with a unit such as \"30s\" or \"5m\", not the bare number %v", data)
	default:
		return data, nil
	}
}

var _ mapstructure.DecodeHookFuncType = durationHook

// nearest returns the candidate closest to s, if it is close enough to be
// a likely typo of it.
func nearest(s string, candidates []string) (string, bool) {
	best, bestDistance := "", max(2, len(s)/4)+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best, best != ""
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		prev := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			prev, row[j] = row[j], min(row[j]+1, row[j-1]+1, prev+cost)
		}
	}
	return row[len(b)]
}
