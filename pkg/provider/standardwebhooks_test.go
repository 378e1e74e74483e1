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

func newTestStandardWebhooks(t testing.TB, now time.Time, secrets ...string) *StandardWebhooks {
	t.Helper()
	verifier, err := NewStandardWebhooks(pinnedConfig(now, secrets...))
	require.NoError(t, err)
	return verifier
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorsVerifyAndSign", func(t *testing.T) {
		t.Parallel()
		for _, v := range standardWebhooksVectors {
			signedAt := time.Unix(v.timestamp, 0)
			signature, err := SignStandardWebhooks(v.secret, v.id, signedAt, []byte(v.body))
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
			ours, err := SignStandardWebhooks(secret, "msg_1", testNow, []byte(body))
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
			_, err := NewStandardWebhooks(pinnedConfig(testNow, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", secret))
			require.ErrorContains(t, err, "secret 1")
			require.NotContains(t, err.Error(), secret)
			require.NotContains(t, err.Error(), "MfKQ9r8")
			_, err = SignStandardWebhooks(secret, "msg_1", testNow, nil)
			require.Error(t, err)
		}
		_, err := NewStandardWebhooks(pinnedConfig(testNow, ""))
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
