package sign

import (
	"cmp"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
)

// twilioBodyHashParam is the query parameter Twilio adds to the URL of a
// JSON delivery.
const twilioBodyHashParam = "bodySHA256"

// TwilioParam is one form parameter of a Twilio request.
type TwilioParam struct{ name, value, joined string }

// TwilioParamOrders returns the parameter orders that are accepted: by name
// then value (Twilio's documentation, twilio-python, twilio-node; what
// Twilio signs) and, when it differs, by name+value (twilio-go).
func TwilioParamOrders(params url.Values) [][]TwilioParam {
	var byName []TwilioParam
	for name, values := range params {
		for _, value := range values {
			byName = append(byName, TwilioParam{name: name, value: value, joined: name + value})
		}
	}
	slices.SortFunc(byName, func(a, b TwilioParam) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.value, b.value))
	})
	byJoined := slices.Clone(byName)
	slices.SortStableFunc(byJoined, func(a, b TwilioParam) int { return strings.Compare(a.joined, b.joined) })
	if slices.EqualFunc(byName, byJoined, func(a, b TwilioParam) bool { return a.joined == b.joined }) {
		return [][]TwilioParam{byName}
	}
	return [][]TwilioParam{byName, byJoined}
}

// TwilioURL is one spelling of a webhook URL that Twilio may sign, split
// before its fragment so that bodySHA256 can join the query.
type TwilioURL struct{ Base, Fragment string }

// ParseTwilioURL splits raw before its "#" fragment.
func ParseTwilioURL(raw string) TwilioURL {
	base, fragment, found := strings.Cut(raw, "#")
	if found {
		fragment = "#" + fragment
	}
	return TwilioURL{Base: base, Fragment: fragment}
}

// String returns the URL as signed for a form POST.
func (u TwilioURL) String() string { return u.Base + u.Fragment }

// WithBodyHash returns the URL as signed for a JSON POST: bodySHA256 added
// to the query, after "?" or "&".
func (u TwilioURL) WithBodyHash(bodyHash string) string {
	sep := "?"
	switch {
	case strings.HasSuffix(u.Base, "?") || strings.HasSuffix(u.Base, "&"):
		sep = ""
	case strings.Contains(u.Base, "?"):
		sep = "&"
	}
	return u.Base + sep + twilioBodyHashParam + "=" + bodyHash + u.Fragment
}

// TwilioSigned returns what a form signature covers: the URL, then each
// parameter's name and value, with no separators.
func TwilioSigned(signedURL string, params []TwilioParam) [][]byte {
	parts := make([][]byte, 0, 1+2*len(params))
	parts = append(parts, []byte(signedURL))
	for _, p := range params {
		parts = append(parts, []byte(p.name), []byte(p.value))
	}
	return parts
}

// Twilio returns the X-Twilio-Signature Twilio sends with a form POST of
// params to webhookURL.
func Twilio(token, webhookURL string, params url.Values) string {
	mac := MAC(sha1.New, []byte(token), TwilioSigned(webhookURL, TwilioParamOrders(params)[0])...)
	return base64.StdEncoding.EncodeToString(mac)
}

// TwilioJSON returns the X-Twilio-Signature Twilio sends with a JSON body
// posted to webhookURL: the signature of webhookURL with
// "bodySHA256=<hex SHA-256 of body>" added to its query. Twilio sends the
// request to that URL.
func TwilioJSON(token, webhookURL string, body []byte) string {
	sum := sha256.Sum256(body)
	signed := ParseTwilioURL(webhookURL).WithBodyHash(hex.EncodeToString(sum[:]))
	return base64.StdEncoding.EncodeToString(MAC(sha1.New, []byte(token), []byte(signed)))
}
