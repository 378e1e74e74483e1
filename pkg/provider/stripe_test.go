package provider

import (
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Derived vector from /work/shared/providers.md §1: computed with stripe-go
// v82.5.1 webhook.GenerateTestSignedPayload, secret from stripe-go's own
// tests (Stripe publishes no vector with a secret). Derived, not official.
const (
	stripeVectorSecret = "whsec_test_secret"
	stripeVectorBody   = `{"id":"evt_test_webhook","object":"event"}`
	stripeVectorHeader = "t=1492774577,v1=88a022085c6bdb887b02cb26ff76dd681234d9675c0f22844059f55552a8883a"
)

var stripeVectorTime = time.Unix(1492774577, 0)

func stripeHeader(value string) http.Header {
	return http.Header{"Stripe-Signature": {value}}
}

func newTestStripe(t testing.TB, now time.Time, secrets ...string) *stripeVerifier {
	t.Helper()
	stripe, err := newStripeVerifier(pinnedConfig(now, secrets...))
	require.NoError(t, err)
	return stripe
}

func TestStripe(t *testing.T) {
	t.Parallel()

	t.Run("DerivedVectorVerifies", func(t *testing.T) {
		t.Parallel()
		stripe := newTestStripe(t, stripeVectorTime, stripeVectorSecret)
		delivery, err := stripe.Verify([]byte(stripeVectorBody), stripeHeader(stripeVectorHeader))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "evt_test_webhook", Payload: []byte(stripeVectorBody)}, requireOneEvent(t, delivery))
		require.Equal(t, map[string]string{"Stripe-Signature": stripeVectorHeader}, delivery.Headers)
	})

	t.Run("SignStripeReproducesTheDerivedVector", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, stripeVectorHeader, sign.Stripe(stripeVectorSecret, stripeVectorTime, []byte(stripeVectorBody)))
	})

	t.Run("SignStripeAgreesWithStripeGo", func(t *testing.T) {
		t.Parallel()
		stripe := newTestStripe(t, testNow, stripeVectorSecret)
		for _, body := range []string{stripeVectorBody, "", "\xff\x00 not json", `{"id":"evt_1","type":"x"}`} {
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
				Payload: []byte(body), Secret: stripeVectorSecret, Timestamp: testNow,
			})
			require.Equal(t, signed.Header, sign.Stripe(stripeVectorSecret, testNow, []byte(body)))
			require.NoError(t, webhook.ValidatePayloadIgnoringTolerance([]byte(body), signed.Header, stripeVectorSecret))
			_, err := stripe.Verify([]byte(body), stripeHeader(signed.Header))
			require.NoError(t, err, "%q", body)
		}
	})

	t.Run("AnyV1OfSeveralMatchesAndV0IsIgnored", func(t *testing.T) {
		t.Parallel()
		stripe := newTestStripe(t, stripeVectorTime, stripeVectorSecret)
		genuine := strings.TrimPrefix(stripeVectorHeader, "t=1492774577,v1=")
		other := strings.Repeat("ab", 32)
		for _, value := range []string{
			"t=1492774577,v1=" + other + ",v1=" + genuine,
			"t=1492774577,v0=" + other + ",v1=" + genuine + ",v1=" + other,
			"v1=" + genuine + ",t=1492774577,x-future=1",
			"t=1492774577,v1=not-hex,v1=" + strings.ToUpper(genuine) + ",v1=" + genuine,
		} {
			_, err := stripe.Verify([]byte(stripeVectorBody), stripeHeader(value))
			require.NoError(t, err, value)
		}
	})

	t.Run("MalformedHeaderIsInvalid", func(t *testing.T) {
		t.Parallel()
		stripe := newTestStripe(t, stripeVectorTime, stripeVectorSecret)
		genuine := strings.TrimPrefix(stripeVectorHeader, "t=1492774577,v1=")
		for _, value := range []string{
			"garbage",
			"t=1492774577",
			"v1=" + genuine,
			"t=1492774578,v1=" + genuine, // a timestamp that was not signed
			"t=1492774577,t=1492774577,v1=" + genuine,
			"t=+1492774577,v1=" + genuine,
			"t=01492774577,v1=" + genuine,
			"t= 1492774577,v1=" + genuine,
			"t=1492774577.0,v1=" + genuine,
			"t=1492774577,v1=" + genuine + ",",
			"t=1492774577,v1=" + genuine + "=",
			"t=1492774577,v1=" + genuine + "00",
			"t=1492774577,v1=" + genuine[:62],
			"t=1492774577,v1=" + strings.ToUpper(genuine),
			"t=1492774577, v1=" + genuine,
			"t=1492774577;v1=" + genuine,
		} {
			_, err := stripe.Verify([]byte(stripeVectorBody), stripeHeader(value))
			requireRejected(t, err, ErrSignatureInvalid, stripeVectorSecret)
		}
	})

	t.Run("FutureTimestampIsRefusedUnlikeStripeGo", func(t *testing.T) {
		t.Parallel()
		now := time.Now()
		value := sign.Stripe(stripeVectorSecret, now.Add(time.Hour), []byte(stripeVectorBody))
		require.NoError(t, webhook.ValidatePayload([]byte(stripeVectorBody), value, stripeVectorSecret))
		_, err := newTestStripe(t, now, stripeVectorSecret).Verify([]byte(stripeVectorBody), stripeHeader(value))
		requireRejected(t, err, ErrTimestampOutsideTolerance, stripeVectorSecret)
	})

	t.Run("BodyWithoutAStringIDIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		stripe := newTestStripe(t, testNow, stripeVectorSecret)
		for _, body := range []string{
			`{"type":"charge.succeeded"}`, `{"id":"","type":"charge.succeeded"}`,
			`{"id":42,"type":"charge.succeeded"}`, `{"id":null,"type":"charge.succeeded"}`,
			`{"ID":"evt_1","type":"charge.succeeded"}`, `{"data":{"id":"evt_1"},"type":"charge.succeeded"}`,
		} {
			delivery, err := stripe.Verify([]byte(body), stripeHeader(sign.Stripe(stripeVectorSecret, testNow, []byte(body))))
			require.NoError(t, err)
			event := requireOneEvent(t, delivery)
			require.ErrorContains(t, event.ParseError, `no event id: the body's "id" is missing or empty`)
			require.Equal(t, Event{Type: "charge.succeeded", ParseError: event.ParseError}, event)
		}
	})
}

// stripeTimestamp finds the t field of a Stripe-Signature header.
var stripeTimestamp = regexp.MustCompile(`(?:^|,)t=([0-9]+)(?:,|$)`)

// FuzzStripeVerify checks that Verify never panics, that every refusal
// wraps a sentinel without quoting the secret, and that whatever verifies
// carries the genuine signature, as stripe-go and the tests' own HMAC agree.
func FuzzStripeVerify(f *testing.F) {
	genuine := strings.TrimPrefix(stripeVectorHeader, "t=1492774577,v1=")
	f.Add([]byte(stripeVectorBody), stripeVectorHeader)
	f.Add([]byte(stripeVectorBody), "t=1492774577,v0="+genuine+",v1="+strings.Repeat("0", 64)+",v1="+genuine)
	f.Add([]byte(stripeVectorBody), "t=1492774577,v0="+genuine)
	f.Add([]byte(stripeVectorBody), "t=1492774578,v1="+genuine)
	f.Add([]byte(`{"id":"evt_test_webhook","object":"event"} `), stripeVectorHeader)
	f.Add([]byte{}, "t=1492774577,v1=")
	f.Add([]byte("\x00\xff"), "t=,v1=,=,,")
	stripe := newTestStripe(f, stripeVectorTime, stripeVectorSecret)

	f.Fuzz(func(t *testing.T, body []byte, value string) {
		delivery, err := stripe.Verify(body, stripeHeader(value))
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), stripeVectorSecret)
			return
		}
		require.NoError(t, webhook.ValidatePayloadIgnoringTolerance(body, value, stripeVectorSecret))
		match := stripeTimestamp.FindStringSubmatch(value)
		require.NotNil(t, match)
		expected := hex.EncodeToString(referenceHMAC([]byte(stripeVectorSecret), append([]byte(match[1]+"."), body...)))
		require.Contains(t, ","+value+",", ",v1="+expected+",")
		event := requireOneEvent(t, delivery)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
			require.NotEmpty(t, event.ID)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}
