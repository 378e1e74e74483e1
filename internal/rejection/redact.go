package rejection

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Bounds on what one sample keeps of a request's headers.
const (
	maxHeaders     = 64
	maxHeaderName  = 128
	maxHeaderValue = 512
)

// secretNameParts mark a header whose value is a credential or a
// signature, redacted whatever it holds: authorization and cookies, every
// provider's signature header (Stripe-Signature, X-Hub-Signature-256,
// X-Shopify-Hmac-Sha256, Webhook-Signature, X-Twilio-Signature, …), and
// API-key and token headers.
var secretNameParts = []string{"auth", "cookie", "signature", "hmac", "token", "secret", "key", "password", "sig"}

// Redactor turns a request's headers into what a sample may keep.
type Redactor struct {
	// needles are the configured secrets and their base64 forms: a header
	// value containing one is redacted whatever its name.
	needles []string
}

// NewRedactor returns a Redactor that also redacts any value containing one
// of secrets (every configured signing secret, password and API key), raw
// or base64-encoded. Secrets shorter than 4 bytes are matched too.
func NewRedactor(secrets []string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		r.needles = append(r.needles, s,
			base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)),
			base64.URLEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)))
	}
	return r
}

// Headers returns h's headers, one value per name (several joined with
// ", "), with every secret-bearing value replaced by "[redacted, N bytes]",
// at most 64 headers, names cut to 128 bytes and values to 512.
func (r *Redactor) Headers(h http.Header) map[string]string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make(map[string]string, min(len(names), maxHeaders+1))
	for i, name := range names {
		if i == maxHeaders {
			out["…"] = strconv.Itoa(len(names)-maxHeaders) + " more headers not kept"
			break
		}
		value := strings.Join(h[name], ", ")
		if r.secret(name, value) {
			value = "[redacted, " + strconv.Itoa(len(value)) + " bytes]"
		} else {
			value = cut(value, maxHeaderValue)
		}
		out[cut(name, maxHeaderName)] = value
	}
	return out
}

func (r *Redactor) secret(name, value string) bool {
	lower := strings.ToLower(name)
	for _, part := range secretNameParts {
		if strings.Contains(lower, part) {
			return true
		}
	}
	for _, n := range r.needles {
		if strings.Contains(value, n) {
			return true
		}
	}
	return false
}

// cut keeps at most s's first n bytes, as valid UTF-8.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
