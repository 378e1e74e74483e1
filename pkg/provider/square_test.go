package provider

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// squareVector is a signing vector from /work/shared/providers.md §4:
// square/square-go-sdk webhooks/client/verify_signature_test.go,
// TestWebhookSignatureValidation.
type squareVector struct {
	source, key, url, body, signature string
}

// squareValidBody is the body of the SDK's "valid signature should pass".
const squareValidBody = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`

var squareVectors = []squareVector{
	{
		source:    "valid signature should pass",
		key:       "Ibxx_5AKakO-3qeNVR61Dw",
		url:       "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		body:      squareValidBody,
		signature: "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
	},
	{
		source:    "unescaped chars validation should pass",
		key:       "signature-key",
		url:       "https://webhook.site/webhooks",
		body:      `{"data":{"type":"webhooks","id":"fake_id"}}`,
		signature: "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA=",
	},
	{
		source:    "escaped characters should pass",
		key:       "signature-key",
		url:       "https://webhook.site/webhooks",
		body:      `{"data":{"type":"webhooks","id":">id<"}}`,
		signature: "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=",
	},
}

// squareMustFail are the same file's cases that must fail, each a change
// of the first vector.
var squareMustFail = []squareVector{
	{
		source: "notification URL mismatch should fail",
		key:    "Ibxx_5AKakO-3qeNVR61Dw", url: "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		body: squareValidBody, signature: "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
	},
	{
		source: "invalid signature key should fail",
		key:    "MCmhFRxGX82xMwg5FsaoQA", url: "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		body: squareValidBody, signature: "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
	},
	{
		source: "invalid signature header should fail",
		key:    "Ibxx_5AKakO-3qeNVR61Dw", url: "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		body: squareValidBody, signature: "1z2n3DEJJiUPKcPzQo1ftvbxGdw=",
	},
	{
		source: "request body mismatch should fail",
		key:    "Ibxx_5AKakO-3qeNVR61Dw", url: "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		body:      strings.Replace(squareValidBody, "2022-07-13", "2022-06-13", 1),
		signature: "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
	},
	{
		source: "formatted request body should fail",
		key:    "Ibxx_5AKakO-3qeNVR61Dw", url: "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		body:      "{\n\t\"merchant_id\": \"MLEFBHHSJGVHD\",\n\t\"type\": \"webhooks.test_notification\",\n\t\"event_id\": \"ac3ac95b-f97d-458c-a6e6-18981597e05f\",\n\t\"created_at\": \"2022-07-13T20:30:59.037339943Z\",\n\t\"data\": {\n\t\t\"type\": \"webhooks\",\n\t\t\"id\": \"bc368e64-01aa-407e-b46e-3231809b1129\"\n\t},\n}",
		signature: "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
	},
}

// squareConformanceURL is the notification URL of the conformance source.
const squareConformanceURL = "https://hooks.example.com/webhooks/square?tenant=1"

func init() {
	registerConformance(squareSigner)
}

func squareSigner() signer {
	get, set := headerSignature("X-Square-Hmacsha256-Signature", "")
	return signer{
		provider:      "square",
		secrets:       [2]string{"Ibxx_5AKakO-3qeNVR61Dw", "MCmhFRxGX82xMwg5FsaoQA"},
		unknownSecret: "signature-key",
		body: func(ids ...string) []byte {
			return []byte(`{"merchant_id":"MLEFBHHSJGVHD","type":"order.created","event_id":"` + ids[0] +
				`","created_at":"2026-11-29T10:00:00Z","data":{"type":"order","id":"ord_1"}}`)
		},
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			mac := referenceHMAC([]byte(secret), append([]byte(squareConformanceURL), body...))
			return request{header: squareHeader(base64.StdEncoding.EncodeToString(mac)), body: body}
		},
		want:         wantOne("order.created"),
		signature:    get,
		setSignature: set,
		decode:       base64.StdEncoding.DecodeString,
		encode:       base64.StdEncoding.EncodeToString,
		config: func(secrets ...string) *Config {
			return &Config{Secrets: secrets, URL: squareConformanceURL}
		},
		signatureHeader: "X-Square-Hmacsha256-Signature",
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, "X-Square-Hmacsha256-Signature", "", "sha256=", "v1,", "sha1=")
		},
		idFromBody: true,
		emptyBody:  ErrSignatureInvalid,
	}
}

// squareHeader returns a Square delivery's headers.
func squareHeader(signature string) http.Header {
	header := http.Header{}
	header.Set("x-square-hmacsha256-signature", signature)
	header.Set("square-environment", "Production")
	header.Set("square-initial-delivery-timestamp", "2022-07-13T20:30:59.037339943Z")
	header.Set("square-retry-number", "1")
	header.Set("square-retry-reason", "http_timeout")
	header.Set("User-Agent", "Square Connect v2")
	return header
}

func newTestSquare(t testing.TB, url string, keys ...string) *squareVerifier {
	t.Helper()
	square, err := newSquareVerifier(&Config{Secrets: keys, URL: url})
	require.NoError(t, err)
	return square
}

func TestSquare(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorsVerifyAndSign", func(t *testing.T) {
		t.Parallel()
		for _, v := range squareVectors {
			require.Equal(t, v.signature, sign.Square(v.key, v.url, []byte(v.body)), v.source)
			require.Equal(t, v.signature,
				base64.StdEncoding.EncodeToString(referenceHMAC([]byte(v.key), []byte(v.url+v.body))), v.source)
			_, err := newTestSquare(t, v.url, "another-key", v.key).Verify([]byte(v.body), squareHeader(v.signature))
			require.NoError(t, err, v.source)
		}
	})

	t.Run("OfficialVectorYieldsItsEvent", func(t *testing.T) {
		t.Parallel()
		v := squareVectors[0]
		delivery, err := newTestSquare(t, v.url, v.key).Verify([]byte(v.body), squareHeader(v.signature))
		require.NoError(t, err)
		require.Equal(t, Event{
			ID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", Type: "webhooks.test_notification", Payload: []byte(v.body),
		}, requireOneEvent(t, delivery))
		require.Equal(t, map[string]string{
			"X-Square-Hmacsha256-Signature":     v.signature,
			"Square-Environment":                "Production",
			"Square-Initial-Delivery-Timestamp": "2022-07-13T20:30:59.037339943Z",
			"Square-Retry-Number":               "1",
			"Square-Retry-Reason":               "http_timeout",
		}, delivery.Headers)
	})

	t.Run("OfficialMustFailCasesAreInvalid", func(t *testing.T) {
		t.Parallel()
		for _, v := range squareMustFail {
			_, err := newTestSquare(t, v.url, v.key).Verify([]byte(v.body), squareHeader(v.signature))
			requireRejected(t, err, ErrSignatureInvalid, v.key)
		}
	})

	t.Run("URLIsMatchedByteForByte", func(t *testing.T) {
		t.Parallel()
		v := squareVectors[1]
		for _, url := range []string{
			"https://webhook.site/webhooks/", "http://webhook.site/webhooks", "https://WEBHOOK.site/webhooks",
			"https://webhook.site:443/webhooks", "https://webhook.site/webhooks?", "https://webhook.site/Webhooks",
			" https://webhook.site/webhooks",
		} {
			_, err := newTestSquare(t, url, v.key).Verify([]byte(v.body), squareHeader(v.signature))
			requireRejected(t, err, ErrSignatureInvalid, v.key)
		}
	})

	t.Run("EmptyBodyIsInvalidEvenWhenSigned", func(t *testing.T) {
		t.Parallel()
		// square-go-sdk's VerifySignature returns nil for an empty body
		// without checking anything.
		v := squareVectors[1]
		_, err := newTestSquare(t, v.url, v.key).Verify(nil, squareHeader(sign.Square(v.key, v.url, nil)))
		requireRejected(t, err, ErrSignatureInvalid, v.key)
	})

	t.Run("SpellingsGosLenientDecoderAcceptsAreInvalid", func(t *testing.T) {
		t.Parallel()
		v := squareVectors[1]
		square := newTestSquare(t, v.url, v.key)
		for _, spelling := range []string{
			v.signature[:len(v.signature)-2] + "B=", // "…OA=": A's unused low bits set
			v.signature[:20] + "\n" + v.signature[20:],
			strings.TrimSuffix(v.signature, "="),
			v.signature + " ",
		} {
			_, err := square.Verify([]byte(v.body), squareHeader(spelling))
			requireRejected(t, err, ErrSignatureInvalid, v.key)
		}
	})

	t.Run("LegacySHA1SignatureIsNotAccepted", func(t *testing.T) {
		t.Parallel()
		v := squareVectors[1]
		header := squareHeader("")
		header.Set("x-square-signature", "1z2n3DEJJiUPKcPzQo1ftvbxGdw=")
		_, err := newTestSquare(t, v.url, v.key).Verify([]byte(v.body), header)
		requireRejected(t, err, ErrSignatureMissing, v.key)
	})

	t.Run("MissingURLIsAnErrorNamingTheKey", func(t *testing.T) {
		t.Parallel()
		_, err := newSquareVerifier(&Config{Secrets: []string{"signature-key"}})
		require.ErrorContains(t, err, "square: url is required")
		_, err = New("square", &Config{Secrets: []string{"signature-key"}})
		require.ErrorContains(t, err, "url")
		_, err = SignHeaders(&SignParams{Provider: "square", Secret: "signature-key", Body: []byte("{}")})
		require.ErrorContains(t, err, "url")
	})

	t.Run("SignHeadersSignsTheConfiguredURL", func(t *testing.T) {
		t.Parallel()
		v := squareVectors[0]
		header, err := SignHeaders(&SignParams{
			Provider: "square", Secret: v.key, Body: []byte(v.body), Config: &Config{URL: v.url},
		})
		require.NoError(t, err)
		require.Equal(t, v.signature, header.Get("x-square-hmacsha256-signature"))
	})
}

// FuzzSquareVerify checks that Verify never panics, that every refusal
// wraps a sentinel without quoting the key, and that whatever verifies is a
// non-empty body carrying exactly the genuine signature.
func FuzzSquareVerify(f *testing.F) {
	v := squareVectors[0]
	f.Add([]byte(v.body), v.signature)
	f.Add([]byte(squareVectors[2].body), squareVectors[2].signature)
	f.Add([]byte{}, sign.Square(v.key, v.url, nil))
	f.Add([]byte(`{"event_id":"\u0000"}`), sign.Square(v.key, v.url, []byte(`{"event_id":"\u0000"}`)))
	f.Add([]byte(v.body), v.signature[:42]+"O=")
	square := newTestSquare(f, v.url, v.key)

	f.Fuzz(func(t *testing.T, body []byte, signature string) {
		delivery, err := square.Verify(body, squareHeader(signature))
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), v.key)
			return
		}
		require.NotEmpty(t, body)
		require.Equal(t, base64.StdEncoding.EncodeToString(referenceHMAC([]byte(v.key), append([]byte(v.url), body...))), signature)
		event := requireOneEvent(t, delivery)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
			require.NotEmpty(t, event.ID)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}
