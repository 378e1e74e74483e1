package secret

import (
	"encoding/json"
	"log/slog"
	"strconv"
)

// Redacted is what a non-empty String prints as.
const Redacted = "redacted"

// String is a secret setting value: a signing secret, a password, an API
// key, a token. It prints as "redacted" (String, GoString, MarshalJSON,
// MarshalYAML, slog's LogValue; zap uses String), or as "" when empty, which
// shows that it is unset. Reveal returns the value itself.
type String string

// Reveal returns the secret itself, for the code that signs or compares
// with it. Never log it.
func (s String) Reveal() string { return string(s) }

// String returns "redacted", or "" when s is empty.
func (s String) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString is String quoted, so %#v never leaks the secret either.
func (s String) GoString() string { return strconv.Quote(s.String()) }

// MarshalJSON encodes String.
func (s String) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML encodes String.
func (s String) MarshalYAML() (any, error) { return s.String(), nil }

// LogValue makes slog log String.
func (s String) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Reveal returns the values of secrets, in order.
func Reveal(secrets []String) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = string(s)
	}
	return out
}
