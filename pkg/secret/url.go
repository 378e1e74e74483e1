package secret

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// redactedPassword replaces the passwords in a URL's String.
const redactedPassword = "xxxxx"

// schemeRE matches the scheme of a URL.
var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// dsnKeyRE matches a libpq keyword such as host, dbname or sslmode.
var dsnKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// sensitiveDSNKeys are the libpq keywords whose values are redacted.
var sensitiveDSNKeys = []string{"password", "sslpassword"}

// URL is a setting that holds a URL or a libpq key=value connection string
// which may carry a password (database.url, a source's url, a destination's
// url). It prints with any password replaced by "xxxxx" (String, GoString,
// MarshalJSON, MarshalYAML, slog's LogValue); a string it cannot parse
// prints as "xxxxx" whole. Reveal returns the value itself.
type URL string

// Reveal returns the URL itself, password included, for the code that
// connects with it. Never log it.
func (u URL) Reveal() string { return string(u) }

// String returns the URL with any password replaced by "xxxxx".
func (u URL) String() string { return redactConnString(string(u)) }

// GoString is String quoted, so %#v never leaks the password either.
func (u URL) GoString() string { return strconv.Quote(u.String()) }

// MarshalJSON encodes String.
func (u URL) MarshalJSON() ([]byte, error) { return json.Marshal(u.String()) }

// MarshalYAML encodes String.
func (u URL) MarshalYAML() (any, error) { return u.String(), nil }

// LogValue makes slog log String.
func (u URL) LogValue() slog.Value { return slog.StringValue(u.String()) }

// CheckPostgres accepts a postgres:// or postgresql:// URL or a libpq
// key=value connection string. Its errors never quote the string, which
// holds a password.
func (u URL) CheckPostgres() error {
	s := string(u)
	if scheme := schemeRE.FindStringSubmatch(s); scheme != nil {
		if !isPostgresScheme(scheme[1]) {
			return errors.New("URL scheme must be postgres:// or postgresql://")
		}
		// url.Parse's errors quote the URL, so they are not passed on.
		if _, err := url.Parse(s); err != nil {
			return errors.New("not a valid URL")
		}
		return nil
	}
	if _, err := parseDSN(s); err != nil {
		return errors.New("must be a postgres:// or postgresql:// URL or a key=value connection string: " + err.Error())
	}
	return nil
}

func isPostgresScheme(scheme string) bool {
	scheme = strings.ToLower(scheme)
	return scheme == "postgres" || scheme == "postgresql"
}

// HasParam reports whether the URL's query, or the key=value connection
// string, sets key.
func (u URL) HasParam(key string) bool {
	s := string(u)
	if schemeRE.MatchString(s) {
		parsed, err := url.Parse(s)
		return err == nil && parsed.Query().Has(key)
	}
	pairs, err := parseDSN(s)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(pairs, func(pair dsnPair) bool { return pair.key == key })
}

// redactConnString returns s, a URL or key=value connection string, with
// any password replaced by "xxxxx". A string it cannot parse is replaced
// whole.
func redactConnString(s string) string {
	if s == "" {
		return ""
	}
	if schemeRE.MatchString(s) {
		return redactURL(s)
	}
	return redactDSN(s)
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return redactedPassword
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redactedPassword)
	} else if u.User == nil && strings.Contains(s, "@") {
		// Probably a password with an unescaped / ? or #, misparsed.
		return redactedPassword
	}
	if query := u.Query(); len(query) > 0 {
		redacted := false
		for _, key := range sensitiveDSNKeys {
			if query.Has(key) {
				query.Set(key, redactedPassword)
				redacted = true
			}
		}
		if redacted {
			u.RawQuery = query.Encode()
		}
	}
	return u.String()
}

func redactDSN(s string) string {
	pairs, err := parseDSN(s)
	if err != nil {
		return redactedPassword
	}
	parts := make([]string, len(pairs))
	for i, pair := range pairs {
		for _, key := range sensitiveDSNKeys {
			if strings.EqualFold(pair.key, key) {
				pair.value = redactedPassword
			}
		}
		parts[i] = pair.key + "=" + quoteDSNValue(pair.value)
	}
	return strings.Join(parts, " ")
}

type dsnPair struct{ key, value string }

// parseDSN parses a libpq key=value connection string: pairs separated by
// whitespace, spaces allowed around =, values optionally single-quoted, and
// backslash escaping the next character. Errors never quote the input.
func parseDSN(s string) ([]dsnPair, error) {
	var pairs []dsnPair
	s = strings.TrimLeft(s, dsnSpace)
	for s != "" {
		key, rest, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || !dsnKeyRE.MatchString(key) {
			return nil, errors.New("expected keyword=value")
		}
		value, rest, err := parseDSNValue(strings.TrimLeft(rest, dsnSpace))
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, dsnPair{key: key, value: value})
		s = strings.TrimLeft(rest, dsnSpace)
	}
	if len(pairs) == 0 {
		return nil, errors.New("empty")
	}
	return pairs, nil
}

const dsnSpace = " \t\n\r\v\f"

// parseDSNValue reads one value from the start of s and returns it and the
// rest of s.
func parseDSNValue(s string) (string, string, error) {
	var value strings.Builder
	quoted := strings.HasPrefix(s, "'")
	if quoted {
		s = s[1:]
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			value.WriteByte(s[i])
		case quoted && c == '\'':
			return value.String(), s[i+1:], nil
		case !quoted && strings.IndexByte(dsnSpace, c) >= 0:
			return value.String(), s[i:], nil
		default:
			value.WriteByte(c)
		}
	}
	if quoted {
		return "", "", errors.New("unterminated quoted value")
	}
	return value.String(), "", nil
}

func quoteDSNValue(value string) string {
	if value != "" && !strings.ContainsAny(value, dsnSpace+`'\`) {
		return value
	}
	value = strings.ReplaceAll(value, `\`, `\\`)
	value = strings.ReplaceAll(value, `'`, `\'`)
	return "'" + value + "'"
}
