package provider

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// standardWebhooksVector is a signing vector from /work/shared/providers.md §6.
type standardWebhooksVector struct {
	source, secret, id string
	timestamp          int64
	body, signature    string
}

var standardWebhooksVectors = []standardWebhooksVector{
	{
		source:    "standard-webhooks libraries/go/webhook_test.go TestWebhookSign (also Python, JS, Ruby, svix go)",
		secret:    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		id:        "msg_p5jXN8AQM9LWM0D4loKWxJek",
		timestamp: 1614265330,
		body:      `{"test": 2432232314}`,
		signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
	},
	{
		source:    "standard-webhooks libraries/rust/src/lib.rs test_sign",
		secret:    "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
		id:        "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
		timestamp: 1649367553,
		body:      `{"email":"test@example.com","username":"test_user"}`,
		signature: "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
	},
}

func init() {
	registerConformance(standardWebhooksSigner)
	registerConformance(svixSigner)
}

// standardWebhooksSignerFor returns the signer of a provider speaking the
// Standard Webhooks scheme under the given header names.
func standardWebhooksSignerFor(provider, idHeader, timestampHeader, signatureHeader string) signer {
	get, set := headerSignature(signatureHeader, "v1,")
	return signer{
		provider: provider,
		// Secrets of the Go and Rust libraries' vectors.
		secrets:       [2]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"},
		unknownSecret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("an unknown 24-byte key!!")),
		body:          conformanceJSON,
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			wh, err := standardwebhooks.NewWebhook(secret)
			require.NoError(t, err)
			signature, err := wh.Sign(id, at, body)
			require.NoError(t, err)
			header := http.Header{}
			header.Set(signatureHeader, signature)
			header.Set(timestampHeader, strconv.FormatInt(at.Unix(), 10))
			if id != "" {
				header.Set(idHeader, id)
			}
			return request{header: header, body: body}
		},
		want:            wantOne("order.created"),
		signature:       get,
		setSignature:    set,
		decode:          base64.StdEncoding.DecodeString,
		encode:          base64.StdEncoding.EncodeToString,
		signatureHeader: signatureHeader,
		timestamped:     true,
		timestampHeader: timestampHeader,
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, signatureHeader, "v1,", "v2,", "v1a,", "v0,", "V1,", "v1 ,", ",", "", "v1=")
		},
	}
}

func standardWebhooksSigner() signer {
	return standardWebhooksSignerFor("standardwebhooks", "webhook-id", "webhook-timestamp", "webhook-signature")
}

func svixSigner() signer {
	return standardWebhooksSignerFor("svix", "svix-id", "svix-timestamp", "svix-signature")
}

func standardWebhooksHeader(id, timestamp, signature string) http.Header {
	header := http.Header{}
	header.Set("webhook-id", id)
	header.Set("webhook-timestamp", timestamp)
	header.Set("webhook-signature", signature)
	return header
}

func (v standardWebhooksVector) header(signature string) http.Header {
	return standardWebhooksHeader(v.id, strconv.FormatInt(v.timestamp, 10), signature)
}

func newTestStandardWebhooks(t testing.TB, now time.Time, secrets ...string) *standardWebhooksVerifier {
	t.Helper()
	verifier, err := newStandardWebhooksVerifier(pinnedConfig(now, secrets...))
	require.NoError(t, err)
	return verifier
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorsVerifyAndSign", func(t *testing.T) {
		t.Parallel()
		for _, v := range standardWebhooksVectors {
			signedAt := time.Unix(v.timestamp, 0)
			signature, err := sign.StandardWebhooks(v.secret, v.id, signedAt, []byte(v.body))
			require.NoError(t, err, v.source)
			require.Equal(t, v.signature, signature, v.source)

			for _, secret := range []string{v.secret, strings.TrimPrefix(v.secret, "whsec_")} {
				delivery, err := newTestStandardWebhooks(t, signedAt, secret).Verify([]byte(v.body), v.header(v.signature))
				require.NoError(t, err, v.source)
				require.Equal(t, Event{ID: v.id, Payload: []byte(v.body)}, requireOneEvent(t, delivery), v.source)
				require.Equal(t, map[string]string{
					"Webhook-Id":        v.id,
					"Webhook-Timestamp": strconv.FormatInt(v.timestamp, 10),
					"Webhook-Signature": v.signature,
				}, delivery.Headers)
			}
		}
	})

	t.Run("OfficialNegativesAreInvalid", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		verifier := newTestStandardWebhooks(t, time.Unix(v.timestamp, 0), v.secret)
		for _, signature := range []string{"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", "v1,", "v1", ","} {
			_, err := verifier.Verify([]byte(v.body), v.header(signature))
			requireRejected(t, err, ErrSignatureInvalid, v.secret)
		}
	})

	t.Run("SignaturesOfTheGoLibraryVerifyAndMatchSign", func(t *testing.T) {
		t.Parallel()
		secret := standardWebhooksVectors[1].secret
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		verifier := newTestStandardWebhooks(t, testNow, secret)
		for _, body := range []string{`{"type":"x"}`, "", "\xff\x00 not json"} {
			signature, err := wh.Sign("msg_1", testNow, []byte(body))
			require.NoError(t, err)
			ours, err := sign.StandardWebhooks(secret, "msg_1", testNow, []byte(body))
			require.NoError(t, err)
			require.Equal(t, signature, ours)
			header := standardWebhooksHeader("msg_1", strconv.FormatInt(testNow.Unix(), 10), signature)
			require.NoError(t, wh.VerifyIgnoringTimestamp([]byte(body), header))
			_, err = verifier.Verify([]byte(body), header)
			require.NoError(t, err, "%q", body)
		}
	})

	t.Run("AnyV1EntryMatchesAndOtherVersionsAreSkipped", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		verifier := newTestStandardWebhooks(t, time.Unix(v.timestamp, 0), v.secret)
		wrong := "Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
		// The multi-signature header of the Go library's "valid multi sig is valid".
		multi := strings.Join([]string{"v1," + wrong, "v2," + wrong, v.signature, "v1," + wrong}, " ")
		for _, signature := range []string{multi, "v1a," + wrong + "  " + v.signature, v.signature + " v2,x"} {
			_, err := verifier.Verify([]byte(v.body), v.header(signature))
			require.NoError(t, err, signature)
		}
	})

	t.Run("TamperedIDOrTimestampIsInvalid", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		verifier := newTestStandardWebhooks(t, time.Unix(v.timestamp, 0), v.secret)
		for _, header := range []http.Header{
			standardWebhooksHeader("msg_other", "1614265330", v.signature),
			standardWebhooksHeader("", "1614265330", v.signature),
			standardWebhooksHeader(v.id, "1614265331", v.signature),
		} {
			_, err := verifier.Verify([]byte(v.body), header)
			requireRejected(t, err, ErrSignatureInvalid, v.secret)
		}
	})

	t.Run("MissingOrMalformedTimestamp", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		verifier := newTestStandardWebhooks(t, time.Unix(v.timestamp, 0), v.secret)
		_, err := verifier.Verify([]byte(v.body), standardWebhooksHeader(v.id, "", v.signature))
		requireRejected(t, err, ErrSignatureMissing, v.secret)
		for _, timestamp := range []string{"+1614265330", "01614265330", "1614265330.0", "2021-02-25T15:02:10Z"} {
			_, err := verifier.Verify([]byte(v.body), standardWebhooksHeader(v.id, timestamp, v.signature))
			requireRejected(t, err, ErrSignatureInvalid, v.secret)
		}
	})

	t.Run("MalformedSecretIsAnErrorThatDoesNotQuoteIt", func(t *testing.T) {
		t.Parallel()
		for _, secret := range []string{"whsec_", "whsec_not base64!", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "whsec_abc-_"} {
			_, err := newStandardWebhooksVerifier(pinnedConfig(testNow, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", secret))
			require.ErrorContains(t, err, "secrets[1]")
			require.NotContains(t, err.Error(), secret)
			require.NotContains(t, err.Error(), "MfKQ9r8")
			_, err = sign.StandardWebhooks(secret, "msg_1", testNow, nil)
			require.Error(t, err)
		}
		_, err := newStandardWebhooksVerifier(pinnedConfig(testNow, ""))
		require.Error(t, err)
	})
}

// FuzzStandardWebhooksVerify checks that Verify never panics, that every
// refusal wraps a sentinel without quoting the secret, and that whatever
// verifies carries a v1 entry equal to the genuine signature, which the Go
// library also accepts.
func FuzzStandardWebhooksVerify(f *testing.F) {
	v := standardWebhooksVectors[0]
	f.Add([]byte(v.body), v.id, "1614265330", v.signature)
	f.Add([]byte(v.body), v.id, "1614265330", "v2,x v1a,y "+v.signature)
	f.Add([]byte(v.body), v.id, "1614265331", v.signature)
	f.Add([]byte(v.body), "", "1614265330", "v1,")
	f.Add([]byte{}, "msg", "0", "v1,,v1 v1,=")
	verifier := newTestStandardWebhooks(f, time.Unix(v.timestamp, 0), v.secret)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v.secret, "whsec_"))
	require.NoError(f, err)
	wh, err := standardwebhooks.NewWebhook(v.secret)
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, body []byte, id, timestamp, signature string) {
		header := standardWebhooksHeader(id, timestamp, signature)
		delivery, err := verifier.Verify(body, header)
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), strings.TrimPrefix(v.secret, "whsec_"))
			return
		}
		signed := []byte(id + "." + timestamp + "." + string(body))
		genuine := "v1," + base64.StdEncoding.EncodeToString(referenceHMAC(key, signed))
		require.Contains(t, strings.Split(signature, " "), genuine)
		if id != "" {
			require.NoError(t, wh.VerifyIgnoringTimestamp(body, header))
		}
		event := requireOneEvent(t, delivery)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
			require.Equal(t, id, event.ID)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}

// svixHeader returns v's headers under Svix's names.
func (v standardWebhooksVector) svixHeader(signature string) http.Header {
	header := http.Header{}
	header.Set("svix-id", v.id)
	header.Set("svix-timestamp", strconv.FormatInt(v.timestamp, 10))
	header.Set("svix-signature", signature)
	return header
}

func newTestSvix(t testing.TB, now time.Time, secrets ...string) *standardWebhooksVerifier {
	t.Helper()
	verifier, err := newSvixVerifier(pinnedConfig(now, secrets...))
	require.NoError(t, err)
	return verifier
}

func TestSvix(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorsVerifyUnderSvixHeaders", func(t *testing.T) {
		t.Parallel()
		// The Standard Webhooks vectors; the first is also svix/svix-webhooks
		// go/webhook_test.go's.
		for _, v := range standardWebhooksVectors {
			delivery, err := newTestSvix(t, time.Unix(v.timestamp, 0), v.secret).Verify([]byte(v.body), v.svixHeader(v.signature))
			require.NoError(t, err, v.source)
			require.Equal(t, Event{ID: v.id, Payload: []byte(v.body)}, requireOneEvent(t, delivery), v.source)
			require.Equal(t, map[string]string{
				"Svix-Id":        v.id,
				"Svix-Timestamp": strconv.FormatInt(v.timestamp, 10),
				"Svix-Signature": v.signature,
			}, delivery.Headers)
		}
	})

	t.Run("WebhookHeadersAreTheFallback", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		delivery, err := newTestSvix(t, time.Unix(v.timestamp, 0), v.secret).Verify([]byte(v.body), v.header(v.signature))
		require.NoError(t, err)
		require.Equal(t, v.id, requireOneEvent(t, delivery).ID)
		require.Contains(t, delivery.Headers, "Webhook-Signature")
	})

	t.Run("HeaderSetsAreNeverMixed", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		verifier := newTestSvix(t, time.Unix(v.timestamp, 0), v.secret)
		for _, svixName := range []string{"svix-id", "svix-timestamp", "svix-signature"} {
			header := v.header(v.signature) // a complete webhook-* set …
			header.Set(svixName, v.svixHeader(v.signature).Get(svixName))
			_, err := verifier.Verify([]byte(v.body), header) // … and one svix-* header
			requireNotAuthentic(t, err)
		}
	})

	t.Run("OfficialNegativesAreInvalid", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		verifier := newTestSvix(t, time.Unix(v.timestamp, 0), v.secret)
		for _, signature := range []string{"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", "v1,", "v1", ","} {
			_, err := verifier.Verify([]byte(v.body), v.svixHeader(signature))
			requireRejected(t, err, ErrSignatureInvalid, v.secret)
		}
	})

	t.Run("ErrorsNameSvix", func(t *testing.T) {
		t.Parallel()
		_, err := newSvixVerifier(pinnedConfig(testNow, "whsec_%%%"))
		require.ErrorContains(t, err, "svix: secrets[0]")
		v := standardWebhooksVectors[0]
		_, err = newTestSvix(t, testNow, v.secret).Verify([]byte(v.body), http.Header{})
		require.ErrorContains(t, err, "svix: no webhook-signature header")
	})

	t.Run("SignHeadersUsesSvixNames", func(t *testing.T) {
		t.Parallel()
		v := standardWebhooksVectors[0]
		header, err := SignHeaders(&SignParams{
			Provider: "svix", Secret: v.secret, EventID: v.id, Time: time.Unix(v.timestamp, 0), Body: []byte(v.body),
		})
		require.NoError(t, err)
		require.Equal(t, v.svixHeader(v.signature).Get("svix-signature"), header.Get("svix-signature"))
		require.Equal(t, v.id, header.Get("svix-id"))
		require.Empty(t, header.Get("webhook-signature"))
	})
}

// FuzzSvixVerify checks, for Svix's header names and the webhook-* fallback,
// that Verify never panics, that every refusal wraps a sentinel without
// quoting the secret, and that whatever verifies carries the genuine v1
// signature of the header set it was read from.
func FuzzSvixVerify(f *testing.F) {
	v := standardWebhooksVectors[0]
	f.Add([]byte(v.body), v.id, "1614265330", v.signature, false)
	f.Add([]byte(v.body), v.id, "1614265330", v.signature, true)
	f.Add([]byte(v.body), v.id, "1614265330", "v2,x v1a,y "+v.signature, false)
	f.Add([]byte(v.body), v.id, "1614265331", v.signature, false)
	f.Add([]byte(v.body), "", "1614265330", "v1,", true)
	f.Add([]byte{}, "msg", "0", "v1,,v1 v1,=", false)
	verifier := newTestSvix(f, time.Unix(v.timestamp, 0), v.secret)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v.secret, "whsec_"))
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, body []byte, id, timestamp, signature string, fallback bool) {
		header := standardWebhooksHeader(id, timestamp, signature)
		if !fallback {
			header = http.Header{"Svix-Id": {id}, "Svix-Timestamp": {timestamp}, "Svix-Signature": {signature}}
		}
		delivery, err := verifier.Verify(body, header)
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), strings.TrimPrefix(v.secret, "whsec_"))
			return
		}
		signed := []byte(id + "." + timestamp + "." + string(body))
		genuine := "v1," + base64.StdEncoding.EncodeToString(referenceHMAC(key, signed))
		require.Contains(t, strings.Split(signature, " "), genuine)
		event := requireOneEvent(t, delivery)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
			require.Equal(t, id, event.ID)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}
