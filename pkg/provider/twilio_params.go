package provider

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// This file holds what Twilio's signature covers besides the token: the
// spellings of the webhook URL it may sign and the orders of the form
// parameters, and how an authentic form is stored as JSON.

// twilioParam is one form parameter; joined is name+value.
type twilioParam struct{ name, value, joined string }

// twilioParamOrders returns the parameter orders that are accepted: by name
// then value (Twilio's documentation, twilio-python, twilio-node) and, when
// it differs, by name+value (twilio-go).
func twilioParamOrders(params url.Values) [][]twilioParam {
	var byName []twilioParam
	for name, values := range params {
		for _, value := range values {
			byName = append(byName, twilioParam{name: name, value: value, joined: name + value})
		}
	}
	slices.SortFunc(byName, func(a, b twilioParam) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.value, b.value))
	})
	byJoined := slices.Clone(byName)
	slices.SortStableFunc(byJoined, func(a, b twilioParam) int { return strings.Compare(a.joined, b.joined) })
	if slices.EqualFunc(byName, byJoined, func(a, b twilioParam) bool { return a.joined == b.joined }) {
		return [][]twilioParam{byName}
	}
	return [][]twilioParam{byName, byJoined}
}

// twilioURL is one spelling of the configured URL that Twilio may sign,
// split before its fragment so that bodySHA256 can join the query.
type twilioURL struct{ base, fragment string }

// String returns the URL as signed for a form POST.
func (u twilioURL) String() string { return u.base + u.fragment }

// withBodyHash returns the URL as signed for a JSON POST: bodySHA256 added
// to the query, after "?" or "&".
func (u twilioURL) withBodyHash(bodyHash string) string {
	sep := "?"
	switch {
	case strings.HasSuffix(u.base, "?") || strings.HasSuffix(u.base, "&"):
		sep = ""
	case strings.Contains(u.base, "?"):
		sep = "&"
	}
	return u.base + sep + twilioBodyHashParam + "=" + bodyHash + u.fragment
}

// twilioURLs validates the configured URL and returns the spellings Twilio
// may have signed: as configured first, then with the default port added or
// removed, each with and without its fragment.
func twilioURLs(raw string) ([]twilioURL, error) {
	if raw == "" {
		return nil, errors.New("url is required: the webhook URL exactly as configured at Twilio")
	}
	parsed, err := url.Parse(raw)
	if err != nil { // url.Parse's error quotes the URL, which may hold credentials
		return nil, errors.New("url is not a valid URL")
	}
	if (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
		return nil, errors.New("url must be an absolute http or https URL")
	}
	base, fragment, found := strings.Cut(raw, "#")
	if found {
		fragment = "#" + fragment
	}
	bases := []string{base}
	if twin, ok := twilioPortTwin(base, parsed); ok {
		bases = append(bases, twin)
	}
	var urls []twilioURL
	for _, b := range bases {
		urls = append(urls, twilioURL{base: b, fragment: fragment})
		if fragment != "" {
			urls = append(urls, twilioURL{base: b})
		}
	}
	return urls, nil
}

// twilioPortTwin returns base with the scheme's default port added when it
// has no port, or with its port removed, as twilio-go's validator tries. The
// rest of the URL is kept byte for byte.
func twilioPortTwin(base string, parsed *url.URL) (string, bool) {
	start := strings.Index(base, "://") + len("://")
	end := start + strings.IndexAny(base[start:]+"/", "/?")
	authority := base[start:end]
	port := parsed.Port()
	switch {
	case port == "" && !strings.HasSuffix(authority, ":"):
		defaultPort := map[string]string{"https": "443", "http": "80"}[parsed.Scheme]
		return base[:end] + ":" + defaultPort + base[end:], true
	case port != "" && strings.HasSuffix(authority, ":"+port):
		return base[:end-len(":"+port)] + base[end:], true
	}
	return "", false
}

// twilioFormPayload returns the JSON object of an authentic form body's
// parameters, {"Name":"value"}, with an array of values for a parameter sent
// more than once. It is deterministic (members sorted by name) and always
// storable in jsonb: a body without parameters, or a name or value that is
// not UTF-8 or has a NUL, is an error instead.
func twilioFormPayload(body []byte, params url.Values) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("body is empty")
	}
	object := make(map[string]any, len(params))
	for name, values := range params {
		for _, s := range append([]string{name}, values...) {
			if !utf8.ValidString(s) {
				return nil, errors.New("body has a form parameter that is not valid UTF-8")
			}
			if strings.IndexByte(s, 0) >= 0 {
				return nil, errors.New(`body has a form parameter with a NUL (\u0000), which jsonb cannot store`)
			}
		}
		if len(values) == 1 {
			object[name] = values[0]
		} else {
			object[name] = values
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(object); err != nil {
		return nil, fmt.Errorf("form parameters as JSON: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
