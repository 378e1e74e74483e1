package provider

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Vectors from /work/shared/providers.md §8: twilio/twilio-go
// client/request_validator_test.go (the token, URL, parameters, JSON body and
// the signatures below), and the older example of Twilio's webhook security
// docs (same token and URL, other phone numbers).
const (
	twilioVectorToken = "12345"
	twilioVectorURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
	// twilioVectorSignature signs twilioVectorURL with twilioVectorParams.
	twilioVectorSignature = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	// twilioVectorPortSignature signs the URL with ":443" after the host.
	twilioVectorPortSignature = "kvajT1Ptam85bY51eRf/AJRuM3w="
	// twilio-go's http vectors: without a port, and with port 1234.
	twilioVectorHTTPSignature     = "0ZXoZLH/DfblKGATFgpif+LLRf4="
	twilioVectorHTTP1234Signature = "Zmvh+3yNM1Phv2jhDCwEM3q5ebU="
	// The JSON body, its SHA-256, and the signatures of
	// twilioVectorURL+"&bodySHA256=…" and of ".../myapp.php?bodySHA256=…".
	twilioVectorBody              = `{"property": "value", "boolean": true}`
	twilioVectorBodyHash          = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
	twilioVectorBodySignature     = "a9nBmqA0ju/hNViExpshrM61xv4="
	twilioVectorBareURL           = "https://mycompany.com/myapp.php"
	twilioVectorBareBodySignature = "y77kIzt2vzLz71DgmJGsen2scGs="
	// The older docs example: Caller and From are +12349013030.
	twilioDocsSignature = "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
)

// twilioVectorParams are twilio-go's POST parameters.
func twilioVectorParams() url.Values {
	return url.Values{
		"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"},
		"Caller": {"+14158675309"}, "From": {"+14158675309"},
	}
}

// twilioVectorPayload is the JSON object a delivery of twilioVectorParams stores.
const twilioVectorPayload = `{"CallSid":"CA1234567890ABCDE","Caller":"+14158675309","Digits":"1234","From":"+14158675309","To":"+18005551212"}`

func newTestTwilio(t testing.TB, webhookURL string, tokens ...string) *twilioVerifier {
	t.Helper()
	config := pinnedConfig(testNow, tokens...)
	config.URL = webhookURL
	twilio, err := newTwilioVerifier(config)
	require.NoError(t, err)
	return twilio
}

// twilioHeader returns the headers of a Twilio request with signature.
func twilioHeader(signature, contentType string) http.Header {
	header := http.Header{}
	header.Set("X-Twilio-Signature", signature)
	header.Set("Content-Type", contentType)
	header.Set("User-Agent", "TwilioProxy/1.1")
	return header
}

const twilioFormContentType = "application/x-www-form-urlencoded"

// referenceTwilio is the tests' own Twilio signature of a signed string
// built by hand, independent of twilio.go.
func referenceTwilio(token, signed string) string {
	return base64.StdEncoding.EncodeToString(referenceMAC(sha1.New, []byte(token), []byte(signed)))
}

// twilioConformanceURL is the webhook URL of the conformance source.
const twilioConformanceURL = "https://hooks.example.com/webhooks/twilio?source=conformance"

func init() {
	registerConformance(twilioSigner)
}

// twilioSigner delivers JSON bodies the way Twilio signs them (the URL with
// bodySHA256 added, so that the signature covers the bytes), with the id as
// I-Twilio-Idempotency-Token. It always signs the JSON way: a body that
// happens to parse as a form (id=evt_1&type=x) is still a JSON delivery. The
// form scheme, which signs parameters rather than bytes, has its own tests.
func twilioSigner() signer {
	get, set := headerSignature("X-Twilio-Signature", "")
	return signer{
		provider:      "twilio",
		secrets:       [2]string{"0ld7w1l10au7h70k3n0000000000000a", "n3w7w1l10au7h70k3n0000000000000b"},
		unknownSecret: "unkn0wnau7h70k3n0000000000000000",
		body:          conformanceJSON,
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			sum := sha256.Sum256(body)
			signed := twilioConformanceURL + "&bodySHA256=" + hex.EncodeToString(sum[:])
			header := twilioHeader(referenceTwilio(secret, signed), "application/json")
			if id != "" {
				header.Set("I-Twilio-Idempotency-Token", id)
			}
			return request{header: header, body: body}
		},
		want:         wantOne("order.created"),
		signature:    get,
		setSignature: set,
		decode:       base64.StdEncoding.DecodeString,
		encode:       base64.StdEncoding.EncodeToString,
		config: func(secrets ...string) *Config {
			return &Config{Secrets: secrets, URL: twilioConformanceURL}
		},
		signatureHeader: "X-Twilio-Signature",
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, "X-Twilio-Signature", "", "sha1=", "sha256=", "v1,", " ")
		},
	}
}

func TestTwilioGoldenVectors(t *testing.T) {
	t.Parallel()
	form := []byte(twilioVectorParams().Encode())

	t.Run("FormVectorVerifiesAndIsStoredAsJSON", func(t *testing.T) {
		t.Parallel()
		delivery, err := newTestTwilio(t, twilioVectorURL, twilioVectorToken).Verify(form,
			twilioHeader(twilioVectorSignature, twilioFormContentType))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "CA1234567890ABCDE", Type: "call", Payload: []byte(twilioVectorPayload)},
			requireOneEvent(t, delivery))
		require.Equal(t, map[string]string{"X-Twilio-Signature": twilioVectorSignature}, delivery.Headers)
	})

	t.Run("DefaultPortIsTriedBothWays", func(t *testing.T) {
		t.Parallel()
		withPort := strings.Replace(twilioVectorURL, ".com", ".com:443", 1)
		for _, tc := range []struct{ configured, signature string }{
			{twilioVectorURL, twilioVectorSignature},
			{twilioVectorURL, twilioVectorPortSignature}, // Twilio signed with :443
			{withPort, twilioVectorPortSignature},
			{withPort, twilioVectorSignature}, // Twilio signed without it
		} {
			_, err := newTestTwilio(t, tc.configured, twilioVectorToken).Verify(form,
				twilioHeader(tc.signature, twilioFormContentType))
			require.NoError(t, err, "%s signed %s", tc.configured, tc.signature)
		}
	})

	t.Run("TwilioGoHTTPAndPortVectorsVerify", func(t *testing.T) {
		t.Parallel()
		http1234 := strings.Replace(strings.Replace(twilioVectorURL, ".com", ".com:1234", 1), "https", "http", 1)
		for _, tc := range []struct{ configured, signature string }{
			{strings.Replace(twilioVectorURL, "https", "http", 1), twilioVectorHTTPSignature},
			{http1234, twilioVectorHTTP1234Signature},
			// twilio-go: "https and port is specified but signature is generated without it".
			{strings.Replace(twilioVectorURL, ".com", ".com:1234", 1), twilioVectorSignature},
		} {
			_, err := newTestTwilio(t, tc.configured, twilioVectorToken).Verify(form,
				twilioHeader(tc.signature, twilioFormContentType))
			require.NoError(t, err, "%s signed %s", tc.configured, tc.signature)
		}
	})

	t.Run("JSONBodyVectorsVerify", func(t *testing.T) {
		t.Parallel()
		sum := sha256.Sum256([]byte(twilioVectorBody))
		require.Equal(t, twilioVectorBodyHash, hex.EncodeToString(sum[:]))
		for _, tc := range []struct{ configured, signature string }{
			{twilioVectorURL, twilioVectorBodySignature},
			{twilioVectorBareURL, twilioVectorBareBodySignature},
		} {
			header := twilioHeader(tc.signature, "application/json")
			header.Set("I-Twilio-Idempotency-Token", "idem_1")
			delivery, err := newTestTwilio(t, tc.configured, twilioVectorToken).Verify([]byte(twilioVectorBody), header)
			require.NoError(t, err, tc.configured)
			require.Equal(t, Event{ID: "idem_1", Payload: []byte(twilioVectorBody)}, requireOneEvent(t, delivery))
			require.Equal(t, map[string]string{
				"X-Twilio-Signature": tc.signature, "I-Twilio-Idempotency-Token": "idem_1",
			}, delivery.Headers)
		}
	})

	t.Run("OlderDocsVectorVerifies", func(t *testing.T) {
		t.Parallel()
		params := twilioVectorParams()
		params.Set("Caller", "+12349013030")
		params.Set("From", "+12349013030")
		_, err := newTestTwilio(t, twilioVectorURL, twilioVectorToken).Verify([]byte(params.Encode()),
			twilioHeader(twilioDocsSignature, twilioFormContentType))
		require.NoError(t, err)
		require.Equal(t, twilioDocsSignature, sign.Twilio(twilioVectorToken, twilioVectorURL, params))
	})

	t.Run("SignersReproduceEveryVector", func(t *testing.T) {
		t.Parallel()
		params := twilioVectorParams()
		withPort := strings.Replace(twilioVectorURL, ".com", ".com:443", 1)
		require.Equal(t, twilioVectorSignature, sign.Twilio(twilioVectorToken, twilioVectorURL, params))
		require.Equal(t, twilioVectorPortSignature, sign.Twilio(twilioVectorToken, withPort, params))
		require.Equal(t, twilioVectorBodySignature, sign.TwilioJSON(twilioVectorToken, twilioVectorURL, []byte(twilioVectorBody)))
		require.Equal(t, twilioVectorBareBodySignature, sign.TwilioJSON(twilioVectorToken, twilioVectorBareURL, []byte(twilioVectorBody)))
		// The reference builds the signed strings by hand.
		sorted := "CallSidCA1234567890ABCDECaller+14158675309Digits1234From+14158675309To+18005551212"
		require.Equal(t, twilioVectorSignature, referenceTwilio(twilioVectorToken, twilioVectorURL+sorted))
		require.Equal(t, twilioVectorPortSignature, referenceTwilio(twilioVectorToken, withPort+sorted))
		require.Equal(t, twilioVectorBodySignature,
			referenceTwilio(twilioVectorToken, twilioVectorURL+"&bodySHA256="+twilioVectorBodyHash))
		require.Equal(t, twilioVectorBareBodySignature,
			referenceTwilio(twilioVectorToken, twilioVectorBareURL+"?bodySHA256="+twilioVectorBodyHash))
	})
}

func TestTwilioConfig(t *testing.T) {
	t.Parallel()

	t.Run("URLIsRequired", func(t *testing.T) {
		t.Parallel()
		_, err := newTwilioVerifier(pinnedConfig(testNow, twilioVectorToken))
		require.ErrorContains(t, err, "url is required")
		verifier, err := New("twilio", pinnedConfig(testNow, twilioVectorToken))
		require.ErrorContains(t, err, "url")
		require.Nil(t, verifier)
	})

	t.Run("URLMustBeAbsoluteHTTPAndIsNeverQuoted", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{
			"mycompany.com/myapp.php", "/myapp.php", "ftp://mycompany.com/x", "https://user:s3cr3t@%zz/x", "https:///x",
		} {
			config := pinnedConfig(testNow, twilioVectorToken)
			config.URL = bad
			_, err := newTwilioVerifier(config)
			require.ErrorContains(t, err, "url", bad)
			require.NotContains(t, err.Error(), "s3cr3t")
		}
	})

	t.Run("TokensAreRequired", func(t *testing.T) {
		t.Parallel()
		_, err := newTwilioVerifier(&Config{URL: twilioVectorURL})
		require.ErrorContains(t, err, "secret")
	})
}

func TestTwilio(t *testing.T) {
	t.Parallel()
	form := []byte(twilioVectorParams().Encode())
	const oldToken = "old_auth_token"

	t.Run("EitherTokenVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, oldToken, twilioVectorToken)
		for _, token := range []string{oldToken, twilioVectorToken} {
			_, err := twilio.Verify(form, twilioHeader(sign.Twilio(token, twilioVectorURL, twilioVectorParams()), twilioFormContentType))
			require.NoError(t, err)
			body := []byte(twilioVectorBody)
			_, err = twilio.Verify(body, twilioHeader(sign.TwilioJSON(token, twilioVectorURL, body), "application/json"))
			require.NoError(t, err)
		}
	})

	t.Run("UnknownTokenIsInvalid", func(t *testing.T) {
		t.Parallel()
		_, err := newTestTwilio(t, twilioVectorURL, oldToken).Verify(form, twilioHeader(twilioVectorSignature, twilioFormContentType))
		requireRejected(t, err, ErrSignatureInvalid, oldToken, twilioVectorToken)
	})

	t.Run("AnotherURLIsInvalid", func(t *testing.T) {
		t.Parallel()
		for _, configured := range []string{
			"https://mycompany.com/myapp.php?foo=1&bar=3", "https://mycompany.com/myapp.php?bar=2&foo=1",
			"https://mycompany.com/myapp.php", "https://mycompany.com/myapp.php/?foo=1&bar=2",
			"https://mycompany.co/myapp.php?foo=1&bar=2", "http://mycompany.com:443/myapp.php?foo=1&bar=2",
			"https://MyCompany.com/myapp.php?foo=1&bar=2",
		} {
			_, err := newTestTwilio(t, configured, twilioVectorToken).Verify(form, twilioHeader(twilioVectorSignature, twilioFormContentType))
			requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
		}
	})

	t.Run("TamperedParamsAreInvalid", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		for _, tamper := range []func(url.Values){
			func(p url.Values) { p.Set("Digits", "1235") },
			func(p url.Values) { p.Set("Extra", "") },
			func(p url.Values) { p.Del("To") },
			func(p url.Values) { p.Add("Digits", "1234") },
			func(p url.Values) { p.Set("digits", p.Get("Digits")); p.Del("Digits") },
		} {
			params := twilioVectorParams()
			tamper(params)
			_, err := twilio.Verify([]byte(params.Encode()), twilioHeader(twilioVectorSignature, twilioFormContentType))
			requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
		}
	})

	t.Run("ReorderedOrReencodedParamsStillVerify", func(t *testing.T) {
		t.Parallel()
		// The scheme signs decoded parameters, not bytes (see Twilio's doc).
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		for _, body := range []string{
			"To=%2B18005551212&From=%2B14158675309&Digits=1234&Caller=%2B14158675309&CallSid=CA1234567890ABCDE",
			"CallSid=CA1234567890ABCDE&Caller=%2b14158675309&Digits=%31234&From=%2B14158675309&To=%2B18005551212",
		} {
			delivery, err := twilio.Verify([]byte(body), twilioHeader(twilioVectorSignature, twilioFormContentType))
			require.NoError(t, err)
			require.JSONEq(t, twilioVectorPayload, string(requireOneEvent(t, delivery).Payload))
		}
	})

	t.Run("TamperedJSONBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		for _, body := range []string{
			`{"property": "value", "boolean": false}`, twilioVectorBody + "\n", `{"property":"value","boolean":true}`, "",
		} {
			_, err := twilio.Verify([]byte(body), twilioHeader(twilioVectorBodySignature, "application/json"))
			requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
		}
	})

	t.Run("ContentTypeIsNotConsulted", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		for _, contentType := range []string{"", "application/json", "text/plain; charset=latin1"} {
			delivery, err := twilio.Verify(form, twilioHeader(twilioVectorSignature, contentType))
			require.NoError(t, err)
			require.Equal(t, twilioVectorPayload, string(requireOneEvent(t, delivery).Payload))
		}
		header := twilioHeader(twilioVectorBodySignature, twilioFormContentType)
		header.Set("I-Twilio-Idempotency-Token", "idem_1")
		delivery, err := twilio.Verify([]byte(twilioVectorBody), header)
		require.NoError(t, err)
		require.Equal(t, twilioVectorBody, string(requireOneEvent(t, delivery).Payload))
	})

	t.Run("FormSignatureDoesNotVerifyTheBodyAsJSONNorTheReverse", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		// The JSON signature signs no parameters: a form body under it is refused.
		_, err := twilio.Verify(form, twilioHeader(twilioVectorBodySignature, twilioFormContentType))
		requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
		// The URL alone signed as a form: any JSON body under it is refused.
		_, err = twilio.Verify([]byte(twilioVectorBody), twilioHeader(sign.Twilio(twilioVectorToken, twilioVectorURL, nil), "application/json"))
		requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
	})

	t.Run("EverySingleBitFlipOfTheSignatureBytesIsInvalid", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		for _, tc := range []struct {
			body      []byte
			signature string
		}{{form, twilioVectorSignature}, {[]byte(twilioVectorBody), twilioVectorBodySignature}} {
			mac, err := base64.StdEncoding.DecodeString(tc.signature)
			require.NoError(t, err)
			require.Len(t, mac, sha1.Size)
			for bit := range len(mac) * 8 {
				flipped := append([]byte{}, mac...)
				flipped[bit/8] ^= 1 << (bit % 8)
				_, err := twilio.Verify(tc.body, twilioHeader(base64.StdEncoding.EncodeToString(flipped), ""))
				requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
			}
			for bit := range len(tc.signature) * 8 {
				flipped := []byte(tc.signature)
				flipped[bit/8] ^= 1 << (bit % 8)
				_, err := twilio.Verify(tc.body, http.Header{"X-Twilio-Signature": {string(flipped)}})
				requireNotAuthentic(t, err)
			}
		}
	})

	t.Run("NonCanonicalBase64IsInvalid", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		prefix := twilioVectorSignature[:len(twilioVectorSignature)-2] // "…B8"; '8' carries 2 unused low bits
		for _, spelling := range []string{
			prefix + "9=", prefix + "+=", // unused low bits set
			strings.TrimSuffix(twilioVectorSignature, "="),
			twilioVectorSignature[:10] + "\n" + twilioVectorSignature[10:],
			" " + twilioVectorSignature,
			base64.URLEncoding.EncodeToString(twilioDecodeBase64(t, twilioVectorSignature)) + "x",
		} {
			_, err := twilio.Verify(form, http.Header{"X-Twilio-Signature": {spelling}})
			requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
		}
	})

	t.Run("MissingOrEmptySignatureIsMissing", func(t *testing.T) {
		t.Parallel()
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		for _, header := range []http.Header{{}, {"X-Twilio-Signature": {""}}, {"X-Twilio-Signature-256": {twilioVectorSignature}}} {
			_, err := twilio.Verify(form, header)
			requireRejected(t, err, ErrSignatureMissing, twilioVectorToken)
		}
	})

	t.Run("FragmentIsTriedWithAndWithout", func(t *testing.T) {
		t.Parallel()
		configured := twilioVectorURL + "#ct=3000&rt=5000"
		twilio := newTestTwilio(t, configured, twilioVectorToken)
		for _, signedURL := range []string{twilioVectorURL, configured} {
			_, err := twilio.Verify(form, twilioHeader(sign.Twilio(twilioVectorToken, signedURL, twilioVectorParams()), ""))
			require.NoError(t, err, signedURL)
		}
		body := []byte(twilioVectorBody)
		_, err := twilio.Verify(body, twilioHeader(twilioVectorBodySignature, "application/json"))
		require.NoError(t, err)
		_, err = twilio.Verify(body, twilioHeader(sign.TwilioJSON(twilioVectorToken, configured, body), "application/json"))
		require.NoError(t, err)
		require.Equal(t, referenceTwilio(twilioVectorToken, twilioVectorURL+"&bodySHA256="+twilioVectorBodyHash+"#ct=3000&rt=5000"),
			sign.TwilioJSON(twilioVectorToken, configured, body))
	})

	t.Run("BothParameterOrdersVerify", func(t *testing.T) {
		t.Parallel()
		// "To"+"sip:…" sorts after "ToCity"+"…" as a string, before it by name.
		params := url.Values{"To": {"sip:alice@example.com"}, "ToCity": {"BERLIN"}, "CallSid": {"CA1"}}
		byName := twilioVectorURL + "CallSidCA1Tosip:alice@example.comToCityBERLIN"
		byJoined := twilioVectorURL + "CallSidCA1ToCityBERLINTosip:alice@example.com"
		twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
		for _, signed := range []string{byName, byJoined} {
			_, err := twilio.Verify([]byte(params.Encode()), twilioHeader(referenceTwilio(twilioVectorToken, signed), twilioFormContentType))
			require.NoError(t, err, signed)
		}
		require.Equal(t, referenceTwilio(twilioVectorToken, byName), sign.Twilio(twilioVectorToken, twilioVectorURL, params))
	})

	t.Run("RepeatedParamsAreSortedByValueAndStoredAsAnArray", func(t *testing.T) {
		t.Parallel()
		body := []byte("MediaUrl=b&CallSid=CA1&MediaUrl=a")
		signed := twilioVectorURL + "CallSidCA1MediaUrlaMediaUrlb"
		delivery, err := newTestTwilio(t, twilioVectorURL, twilioVectorToken).Verify(body,
			twilioHeader(referenceTwilio(twilioVectorToken, signed), twilioFormContentType))
		require.NoError(t, err)
		require.Equal(t, `{"CallSid":"CA1","MediaUrl":["b","a"]}`, string(requireOneEvent(t, delivery).Payload))
	})
}

func TestTwilioEvents(t *testing.T) {
	t.Parallel()
	twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)
	verifyForm := func(t *testing.T, params url.Values, token string) Event {
		t.Helper()
		header := twilioHeader(sign.Twilio(twilioVectorToken, twilioVectorURL, params), twilioFormContentType)
		if token != "" {
			header.Set("I-Twilio-Idempotency-Token", token)
		}
		delivery, err := twilio.Verify([]byte(params.Encode()), header)
		require.NoError(t, err)
		return requireOneEvent(t, delivery)
	}

	t.Run("IdempotencyTokenIsTheID", func(t *testing.T) {
		t.Parallel()
		params := url.Values{"MessageSid": {"SM1"}, "SmsSid": {"SM1"}, "MessageStatus": {"delivered"}, "SmsStatus": {"delivered"}}
		event := verifyForm(t, params, "6a1f2c3d-token")
		require.Equal(t, "6a1f2c3d-token", event.ID)
		require.Equal(t, "message.delivered", event.Type)
		require.NoError(t, event.ParseError)
	})

	t.Run("WithoutATokenTheSidAndStatusAreTheID", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			params   url.Values
			id, kind string
		}{
			{url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}}, "SM1:sent", "message.sent"},
			{url.Values{"SmsSid": {"SM2"}, "SmsStatus": {"received"}, "Body": {"hi"}}, "SM2:received", "message.received"},
			{url.Values{"SmsMessageSid": {"SM3"}, "SmsStatus": {"received"}}, "SM3:received", "message.received"},
			{url.Values{"CallSid": {"CA1"}, "CallStatus": {"completed"}}, "CA1:completed", "call.completed"},
			{url.Values{"CallSid": {"CA1"}, "RecordingSid": {"RE1"}, "RecordingStatus": {"completed"}, "CallStatus": {"completed"}},
				"RE1:completed", "recording.completed"},
			{url.Values{"CallSid": {"CA1"}, "RecordingSid": {"RE1"}, "TranscriptionSid": {"TR1"}, "TranscriptionStatus": {"failed"}},
				"TR1:failed", "transcription.failed"},
			{url.Values{"CallSid": {"CA1"}, "RecordingSid": {"RE2"}, "CallStatus": {"in-progress"}}, "RE2", "recording"},
		} {
			event := verifyForm(t, tc.params, "")
			require.Equal(t, tc.id, event.ID, tc.params)
			require.Equal(t, tc.kind, event.Type, tc.params)
			require.NoError(t, event.ParseError)
		}
	})

	t.Run("NeitherTokenNorSidIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		event := verifyForm(t, url.Values{"AccountSid": {"AC1"}}, "")
		require.ErrorContains(t, event.ParseError, "no event id")
		require.Equal(t, Event{ParseError: event.ParseError}, event)
	})

	t.Run("UnstorableTokenFallsBackToTheSid", func(t *testing.T) {
		t.Parallel()
		params := url.Values{"CallSid": {"CA1"}, "CallStatus": {"ringing"}}
		for _, token := range []string{"tok\xff", strings.Repeat("t", 2000)} {
			require.Equal(t, "CA1:ringing", verifyForm(t, params, token).ID)
		}
	})

	t.Run("JSONBodyFallsBackToTheCloudEventIDAndType", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"specversion":"1.0","id":"EZ1","type":"com.twilio.messaging.message.delivered","data":{"messageSid":"SM1"}}`)
		delivery, err := twilio.Verify(body, twilioHeader(sign.TwilioJSON(twilioVectorToken, twilioVectorURL, body), "application/json"))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "EZ1", Type: "com.twilio.messaging.message.delivered", Payload: body}, requireOneEvent(t, delivery))
	})

	t.Run("UnstorableFormIsAuthenticWithParseErrorAndKeepsTheToken", func(t *testing.T) {
		t.Parallel()
		for body, contains := range map[string]string{
			"CallSid=CA1&Body=caf%E9":      "not valid UTF-8",
			"CallSid=CA1&Body=%FF%FE":      "not valid UTF-8",
			"CallSid=CA1&B%C0dy=x":         "not valid UTF-8",
			"CallSid=CA1&Body=a%00b":       `\u0000`,
			"CallSid=CA1&%00=x":            `\u0000`,
			"":                             "body is empty",
			" \r\n\t":                      "body is empty",   //nolint:gocritic // mapKey: a whitespace-only body is the case under test
			"CallSid=CA1&Body=%ED%A0%80ok": "not valid UTF-8", // an encoded surrogate
		} {
			params, err := url.ParseQuery(body)
			require.NoError(t, err, body)
			header := twilioHeader(sign.Twilio(twilioVectorToken, twilioVectorURL, params), twilioFormContentType)
			header.Set("I-Twilio-Idempotency-Token", "idem_1")
			delivery, err := twilio.Verify([]byte(body), header)
			require.NoError(t, err, "an authentic request is not an error: %q", body)
			event := requireOneEvent(t, delivery)
			require.ErrorContains(t, event.ParseError, contains, "%q", body)
			require.Nil(t, event.Payload)
			require.Equal(t, "idem_1", event.ID)
		}
	})

	t.Run("UnstorableJSONIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		for body, contains := range map[string]string{
			`{"CallSid":"CA1","Body":"\u0000"}`: `\u0000`,
			"{\"CallSid\":\"caf\xe9\"}":         "not valid UTF-8",
			`[{"id":"EZ1"}]`:                    "array, not an object",
		} {
			header := twilioHeader(sign.TwilioJSON(twilioVectorToken, twilioVectorURL, []byte(body)), "application/json")
			header.Set("I-Twilio-Idempotency-Token", "idem_1")
			delivery, err := twilio.Verify([]byte(body), header)
			require.NoError(t, err, body)
			event := requireOneEvent(t, delivery)
			require.ErrorContains(t, event.ParseError, contains, body)
			require.Equal(t, Event{ID: "idem_1", ParseError: event.ParseError}, event)
		}
	})

	t.Run("ControlCharactersAndMarkupAreStoredVerbatim", func(t *testing.T) {
		t.Parallel()
		params := url.Values{"CallSid": {"CA1"}, "Body": {"<b>&\x01\"\\ é 😀"}}
		event := verifyForm(t, params, "")
		require.NoError(t, event.ParseError)
		requireStorablePayload(t, event.Payload)
		var decoded map[string]string
		require.NoError(t, json.Unmarshal(event.Payload, &decoded))
		require.Equal(t, map[string]string{"CallSid": "CA1", "Body": "<b>&\x01\"\\ é 😀"}, decoded)
	})

	t.Run("HugeBodiesVerifyWithoutPanicking", func(t *testing.T) {
		t.Parallel()
		params := url.Values{"CallSid": {"CA1"}, "Body": {strings.Repeat("x", hugeBodyBytes)}}
		event := verifyForm(t, params, "idem_big")
		require.Equal(t, "idem_big", event.ID)
		require.Greater(t, len(event.Payload), hugeBodyBytes)

		body := []byte(`{"id":"EZ1","pad":"` + strings.Repeat("y", hugeBodyBytes) + `"}`)
		delivery, err := twilio.Verify(body, twilioHeader(sign.TwilioJSON(twilioVectorToken, twilioVectorURL, body), ""))
		require.NoError(t, err)
		require.Equal(t, "EZ1", requireOneEvent(t, delivery).ID)

		_, err = twilio.Verify(body, twilioHeader(twilioVectorSignature, ""))
		requireRejected(t, err, ErrSignatureInvalid, twilioVectorToken)
	})
}

func TestTwilioSignHeaders(t *testing.T) {
	t.Parallel()
	config := &Config{Secrets: []string{twilioVectorToken}, URL: twilioVectorURL}
	twilio := newTestTwilio(t, twilioVectorURL, twilioVectorToken)

	t.Run("JSONBodyIsSignedWithItsHash", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"type":"order.created"}`)
		header, err := SignHeaders(&SignParams{Provider: "twilio", Secret: twilioVectorToken, EventID: "evt_1", Body: body, Config: config})
		require.NoError(t, err)
		require.Equal(t, "application/json", header.Get("Content-Type"))
		require.Equal(t, sign.TwilioJSON(twilioVectorToken, twilioVectorURL, body), header.Get("X-Twilio-Signature"))
		delivery, err := twilio.Verify(body, header)
		require.NoError(t, err)
		require.Equal(t, Event{ID: "evt_1", Type: "order.created", Payload: body}, requireOneEvent(t, delivery))
	})

	t.Run("FormBodyIsSignedWithItsParams", func(t *testing.T) {
		t.Parallel()
		body := []byte(twilioVectorParams().Encode())
		header, err := SignHeaders(&SignParams{Provider: "twilio", Secret: twilioVectorToken, Body: body, Config: config})
		require.NoError(t, err)
		require.Equal(t, twilioVectorSignature, header.Get("X-Twilio-Signature"))
		require.Equal(t, twilioFormContentType, header.Get("Content-Type"))
		require.Empty(t, header.Get("I-Twilio-Idempotency-Token"))
		_, err = twilio.Verify(body, header)
		require.NoError(t, err)
	})

	t.Run("SigningNeedsTheURLAndASignableBody", func(t *testing.T) {
		t.Parallel()
		_, err := SignHeaders(&SignParams{Provider: "twilio", Secret: twilioVectorToken, Body: []byte(`{}`)})
		require.ErrorContains(t, err, "url")
		_, err = SignHeaders(&SignParams{Provider: "twilio", Secret: twilioVectorToken, Body: []byte("a=%zz"), Config: config})
		require.ErrorContains(t, err, "neither JSON nor form")
	})
}

func twilioDecodeBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// FuzzTwilioVerify checks that Verify never panics, that every refusal wraps
// a sentinel without quoting the token, and that whatever verifies yields
// one event whose id and payload can be stored.
func FuzzTwilioVerify(f *testing.F) {
	form := twilioVectorParams().Encode()
	f.Add([]byte(form), twilioVectorSignature, "")
	f.Add([]byte(form), twilioVectorPortSignature, "idem_1")
	f.Add([]byte(twilioVectorBody), twilioVectorBodySignature, "idem_2")
	f.Add([]byte(twilioVectorBody), twilioVectorSignature, "")
	f.Add([]byte(""), sign.Twilio(twilioVectorToken, twilioVectorURL, nil), "")
	f.Add([]byte("CallSid=CA1&Body=%00"), sign.Twilio(twilioVectorToken, twilioVectorURL, url.Values{"CallSid": {"CA1"}, "Body": {"\x00"}}), "t")
	f.Add([]byte("a=%zz;b"), "", "\xff")
	twilio := newTestTwilio(f, twilioVectorURL, twilioVectorToken)
	other := newTestTwilio(f, twilioVectorURL, "54321")

	f.Fuzz(func(t *testing.T, body []byte, signature, token string) {
		header := http.Header{"X-Twilio-Signature": {signature}, "I-Twilio-Idempotency-Token": {token}}
		delivery, err := twilio.Verify(body, header)
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), twilioVectorToken)
			return
		}
		// What verified was signed with this token: under another token the
		// same delivery is refused.
		_, err = other.Verify(body, header)
		require.ErrorIs(t, err, ErrSignatureInvalid)
		event := requireOneEvent(t, delivery)
		requireStorableKey(t, event.ID)
		requireStorableKey(t, event.Type)
		if event.ParseError == nil {
			require.NotEmpty(t, event.ID)
			requireStorablePayload(t, event.Payload)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}

// FuzzTwilioParams checks the form splitter: whatever form Go parses either
// becomes a jsonb-storable JSON object holding exactly its parameters, or is
// refused with a reason.
func FuzzTwilioParams(f *testing.F) {
	for _, seed := range []string{
		twilioVectorParams().Encode(), "", "a=1&a=2&b", "=x&&y=", "a=%00", "a=%ff", "a=%zz", "a;b=c",
		"k=%22%5C%3Cb%3E%26", "MediaUrl0=https%3A%2F%2Fapi.twilio.com%2Fx&NumMedia=1", "+=+&%2B=%2B",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		params, err := url.ParseQuery(string(body))
		if err != nil {
			return // Verify refuses the form scheme for such a body
		}
		content, err := twilioFormPayload(body, params)
		if err != nil {
			require.Nil(t, content)
			return
		}
		require.NoError(t, parsePayload(content).err)
		var decoded map[string]any
		require.NoError(t, json.Unmarshal(content, &decoded))
		require.Len(t, decoded, len(params))
		for name, values := range params {
			if len(values) == 1 {
				require.Equal(t, values[0], decoded[name])
				continue
			}
			var got []string
			for _, v := range decoded[name].([]any) {
				got = append(got, v.(string))
			}
			require.Equal(t, values, got)
		}
		again, err := twilioFormPayload(body, params)
		require.NoError(t, err)
		require.Equal(t, content, again, "deterministic")
	})
}

// A twilio source is configured with the Auth Token and the webhook URL
// exactly as entered in Twilio's console; a form callback is stored as the
// JSON object of its parameters.
func ExampleNew_twilio() {
	verifier, err := New("twilio", &Config{
		Secrets: []string{"12345"},
		URL:     "https://mycompany.com/myapp.php?foo=1&bar=2",
	})
	if err != nil {
		panic(err)
	}
	params := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}, "To": {"+18005551212"}}
	header := http.Header{}
	header.Set("X-Twilio-Signature", sign.Twilio("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", params))
	delivery, err := verifier.Verify([]byte(params.Encode()), header)
	if err != nil {
		panic(err)
	}
	event := delivery.Events[0]
	fmt.Println(event.ID, event.Type, string(event.Payload))
	// Output:
	// SM1:delivered message.delivered {"MessageSid":"SM1","MessageStatus":"delivered","To":"+18005551212"}
}
