package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

// Redacted returns the configuration as nested maps keyed like the YAML
// file, safe to log. It is read off the structs' mapstructure tags and field
// types, so a setting is redacted by being declared a secret type: a
// secret.String shows as "redacted" ("" when unset), a list of them as their
// count ("2 redacted"), a secret.URL with its password as "xxxxx"; durations
// are strings ("4s").
// With zap: logger.Info("config", zap.Any("config", cfg.Redacted())).
func (c *Config) Redacted() map[string]any { return redactStruct(reflect.ValueOf(c).Elem()) }

var (
	secretsType     = reflect.TypeFor[[]secret.String]()
	durationPtrType = reflect.TypeFor[*time.Duration]()
	stringerType    = reflect.TypeFor[fmt.Stringer]()
)

func redactStruct(v reflect.Value) map[string]any {
	fields := settingFields(v.Type())
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		out[tagName(f)] = redact(v.FieldByIndex(f.Index))
	}
	return out
}

// redact returns v's logged form (see Redacted).
func redact(v reflect.Value) any {
	switch t := v.Type(); {
	case t == secretsType:
		return fmt.Sprintf("%d redacted", v.Len())
	case t == durationPtrType:
		// A key whose zero is explicit; nil (only before ApplyDefaults)
		// reads "default".
		if v.IsNil() {
			return "default"
		}
		return v.Elem().Interface().(time.Duration).String()
	case t.Implements(stringerType) && t.Kind() != reflect.Struct:
		// time.Duration, secret.String and secret.URL.
		return v.Interface().(fmt.Stringer).String()
	case t.Kind() == reflect.Struct:
		return redactStruct(v)
	case isStructPointer(t):
		if v.IsNil() {
			return nil
		}
		return redactStruct(v.Elem())
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = redact(v.Index(i))
		}
		return out
	case t.Kind() == reflect.Map:
		out := make(map[string]any, v.Len())
		for _, k := range v.MapKeys() {
			out[k.String()] = redact(v.MapIndex(k))
		}
		return out
	default:
		return v.Interface()
	}
}

// SecretValues returns the value of every secret.String the config holds
// (the sources' signing secrets, Basic Auth passwords, API keys and
// reconciliation keys, the admin token, River UI's passwords, the
// destinations' signing secrets and the values of tracing.headers), empty
// ones left out: what must never be stored or shown, and what the rejection
// samples redact from any header value.
func (c *Config) SecretValues() []string {
	var out []string
	collectSecrets(reflect.ValueOf(c).Elem(), &out)
	return out
}

var secretType = reflect.TypeFor[secret.String]()

func collectSecrets(v reflect.Value, out *[]string) {
	switch v.Kind() {
	case reflect.String:
		if v.Type() == secretType && v.String() != "" {
			*out = append(*out, v.String())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				collectSecrets(v.Field(i), out)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			collectSecrets(v.Index(i), out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			collectSecrets(v.MapIndex(k), out)
		}
	default:
	}
}

// String returns Redacted as JSON, so printing a Config never leaks secrets.
func (c Config) String() string { return toJSON(c.Redacted()) }

// GoString is String, so %#v never leaks secrets either.
func (c Config) GoString() string { return c.String() }

// LogValue makes slog log Redacted rather than the raw struct.
func (c Config) LogValue() slog.Value { return slog.AnyValue(c.Redacted()) }

func toJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // Keep & in URL queries readable.
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("<unprintable config: %v>", err) // Maps of plain values always encode.
	}
	return strings.TrimSuffix(b.String(), "\n")
}
