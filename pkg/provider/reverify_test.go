package provider

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReverify(t *testing.T) {
	t.Parallel()

	// The official vectors, stored as the inbox stores them (the headers
	// Verify keeps), verified years later with a newer secret listed first.
	vectors := []struct {
		provider  string
		secret    string // the vector's; a newer one is listed before it
		newer     string
		body      string
		headers   map[string]string
		signedAt  time.Time // zero: the scheme signs no time
		tolerance time.Duration
	}{
		{
			provider: "stripe", secret: stripeVectorSecret, newer: "whsec_newer", body: stripeVectorBody,
			headers: map[string]string{"Stripe-Signature": stripeVectorHeader}, signedAt: stripeVectorTime,
		},
		{
			provider: "github", secret: githubVectorSecret, newer: "newer", body: githubVectorBody,
			headers: map[string]string{"X-Hub-Signature-256": githubVectorSignature, "X-Github-Delivery": "d-1", "X-Github-Event": "ping"},
		},
		{
			provider: "paddle", secret: paddleVectorSecret, newer: "pdl_ntfset_newer", body: paddleVectorBody,
			headers: map[string]string{"Paddle-Signature": paddleVectorSignature}, signedAt: time.Unix(1710929255, 0),
			tolerance: 5 * time.Second,
		},
		{
			provider: "slack", secret: slackVectorSecret, newer: "newer", body: slackVectorBody,
			headers:  map[string]string{"X-Slack-Signature": slackVectorSignature, "X-Slack-Request-Timestamp": slackVectorTimestamp},
			signedAt: unixString(t, slackVectorTimestamp),
		},
		{
			provider: "standardwebhooks", secret: standardWebhooksVectors[0].secret, newer: standardWebhooksVectors[1].secret,
			body: standardWebhooksVectors[0].body, signedAt: time.Unix(standardWebhooksVectors[0].timestamp, 0),
			headers: map[string]string{
				"Webhook-Id": standardWebhooksVectors[0].id, "Webhook-Signature": standardWebhooksVectors[0].signature,
				"Webhook-Timestamp": strconv.FormatInt(standardWebhooksVectors[0].timestamp, 10),
			},
		},
	}
	for _, v := range vectors {
		t.Run("OfficialVectorAsOfItsTime/"+v.provider, func(t *testing.T) {
			t.Parallel()
			at := v.signedAt
			if at.IsZero() {
				at = time.Now()
			}
			config := &Config{Secrets: []string{v.newer, v.secret}, Now: func() time.Time { return at }, Tolerance: v.tolerance}
			index, err := Reverify(v.provider, config, []byte(v.body), v.headers)
			require.NoError(t, err)
			require.Equal(t, 1, index, "the older secret signed it")

			config.Now = nil // the current clock
			index, err = Reverify(v.provider, config, []byte(v.body), v.headers)
			if v.signedAt.IsZero() {
				require.NoError(t, err)
				require.Equal(t, 1, index)
				return
			}
			requireRejected(t, err, ErrTimestampOutsideTolerance, v.secret, v.newer)
			require.Equal(t, -1, index)

			_, err = Reverify(v.provider, &Config{Secrets: []string{v.newer}, Now: func() time.Time { return at }}, []byte(v.body), v.headers)
			requireRejected(t, err, ErrSignatureInvalid, v.secret, v.newer)
		})
	}

	t.Run("AdyenWithoutBasicAuthChecksTheItemSignatures", func(t *testing.T) {
		t.Parallel()
		body := adyenBody(adyenVectorItem)
		index, err := Reverify("adyen", &Config{Secrets: []string{adyenVectorKey}, BasicAuth: adyenAuth}, body, nil)
		require.NoError(t, err)
		require.Zero(t, index)
	})

	t.Run("AdyenBatchSignedWithTwoKeysNamesNoSingleKey", func(t *testing.T) {
		t.Parallel()
		const otherKey = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF"
		unsigned := `{"pspReference":"psp2","merchantAccountCode":"m","amount":{"value":1,"currency":"EUR"},"eventCode":"EVENT","success":"true"}`
		signature := adyenReferenceSignature(otherKey, "psp2::m::1:EUR:EVENT:true")
		second := `{"additionalData":{"hmacSignature":"` + signature + `"},` + unsigned[1:]
		body := adyenBody(adyenVectorItem, second)
		index, err := Reverify("adyen", &Config{Secrets: []string{otherKey, adyenVectorKey}}, body, nil)
		require.NoError(t, err)
		require.Equal(t, -1, index, "each key alone fails one item")
	})

	t.Run("HMACAPIKeyIsNotChecked", func(t *testing.T) {
		t.Parallel()
		config := &Config{Secrets: []string{"s3cret"}, HMAC: &HMACConfig{
			Header: "X-Signature", IDPath: "id", APIKeyHeader: "X-Api-Key", APIKeys: []string{"key-1"},
		}}
		body := []byte(`{"id":"evt_1"}`)
		header, err := SignHMAC(config, "s3cret", testNow, "evt_1", body)
		require.NoError(t, err)
		verifier, err := New("hmac", config)
		require.NoError(t, err)
		delivery, err := verifier.Verify(body, header)
		require.NoError(t, err)
		require.NotContains(t, delivery.Headers, "X-Api-Key", "an API key is never stored")
		index, err := Reverify("hmac", config, body, delivery.Headers)
		require.NoError(t, err)
		require.Zero(t, index)
	})

	t.Run("NoSecretIsNothingToCheck", func(t *testing.T) {
		t.Parallel()
		_, err := Reverify("marqeta", &Config{BasicAuth: adyenAuth}, []byte(`{"transactions":[]}`), nil)
		require.ErrorContains(t, err, "no signing secret")
	})
}

func unixString(t *testing.T, s string) time.Time {
	t.Helper()
	secs, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return time.Unix(secs, 0)
}
