package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// This file holds what Twilio's signature covers besides the token: the
// spellings of the webhook URL it may sign and the orders of the form
// parameters, and how an authentic form is stored as JSON.

// twilioURLs validates the configured URL and returns the spellings Twilio
// may have signed: as configured first, then with the default port added or
// removed, each with and without its fragment.
func twilioURLs(raw string) ([]sign.TwilioURL, error) {
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
	configured := sign.ParseTwilioURL(raw)
	base, fragment := configured.Base, configured.Fragment
	bases := []string{base}
	if twin, ok := twilioPortTwin(base, parsed); ok {
		bases = append(bases, twin)
	}
	var urls []sign.TwilioURL
	for _, b := range bases {
		urls = append(urls, sign.TwilioURL{Base: b, Fragment: fragment})
		if fragment != "" {
			urls = append(urls, sign.TwilioURL{Base: b})
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
