package provider

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Vector from /work/shared/providers.md §2: Shopify/shopify-app-js
// lib/webhooks/__tests__/validate.test.ts with lib/__tests__/test-config.ts.
const (
	shopifyVectorSecret    = "test_secret_key"
	shopifyVectorBody      = `{"foo": "bar"}`
	shopifyVectorSignature = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g="
)

// shopifyVectorHeader returns the vector's headers, as in shopify-app-js's
// test, with signature as X-Shopify-Hmac-Sha256.
func shopifyVectorHeader(signature string) http.Header {
	header := http.Header{}
	header.Set("X-Shopify-Hmac-Sha256", signature)
	header.Set("X-Shopify-Topic", "products/create")
	header.Set("X-Shopify-Shop-Domain", "shop1.myshopify.io")
	header.Set("X-Shopify-Api-Version", "2023-01")
	header.Set("X-Shopify-Webhook-Id", "123456789")
	header.Set("X-Shopify-Name", "not kept")
	return header
}

func newTestShopify(t testing.TB, secrets ...string) *shopifyVerifier {
	t.Helper()
	shopify, err := newShopifyVerifier(pinnedConfig(testNow, secrets...))
	require.NoError(t, err)
	return shopify
}

func TestShopify(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorVerifies", func(t *testing.T) {
		t.Parallel()
		delivery, err := newTestShopify(t, shopifyVectorSecret).Verify([]byte(shopifyVectorBody),
			shopifyVectorHeader(shopifyVectorSignature))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "123456789", Type: "products/create", Payload: []byte(shopifyVectorBody)},
			requireOneEvent(t, delivery))
		require.Equal(t, map[string]string{
			"X-Shopify-Hmac-Sha256": shopifyVectorSignature,
			"X-Shopify-Topic":       "products/create",
			"X-Shopify-Shop-Domain": "shop1.myshopify.io",
			"X-Shopify-Api-Version": "2023-01",
			"X-Shopify-Webhook-Id":  "123456789",
		}, delivery.Headers)
	})

	t.Run("SignShopifyReproducesTheOfficialVector", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, shopifyVectorSignature, sign.Shopify(shopifyVectorSecret, []byte(shopifyVectorBody)))
		require.Equal(t, shopifyVectorSignature,
			base64.StdEncoding.EncodeToString(referenceHMAC([]byte(shopifyVectorSecret), []byte(shopifyVectorBody))))
	})

	t.Run("SpellingsGosLenientDecoderAcceptsAreInvalid", func(t *testing.T) {
		t.Parallel()
		shopify := newTestShopify(t, shopifyVectorSecret)
		genuine, err := base64.StdEncoding.DecodeString(shopifyVectorSignature)
		require.NoError(t, err)
		prefix := shopifyVectorSignature[:len(shopifyVectorSignature)-2] // "…a7"; 'g' carries 2 unused low bits
		for _, spelling := range []string{
			prefix + "h=", prefix + "i=", prefix + "j=", // unused low bits set
			shopifyVectorSignature[:20] + "\n" + shopifyVectorSignature[20:], // newlines are skipped
			shopifyVectorSignature + "\r\n",
		} {
			decoded, err := base64.StdEncoding.DecodeString(spelling)
			require.NoError(t, err)
			require.Equal(t, genuine, decoded, "Go's default decoder takes %q for the genuine MAC", spelling)
			_, err = shopify.Verify([]byte(shopifyVectorBody), shopifyVectorHeader(spelling))
			requireRejected(t, err, ErrSignatureInvalid, shopifyVectorSecret)
		}
	})

	t.Run("OtherEncodingsOfTheGenuineMACAreInvalid", func(t *testing.T) {
		t.Parallel()
		shopify := newTestShopify(t, shopifyVectorSecret)
		mac := referenceHMAC([]byte(shopifyVectorSecret), []byte(shopifyVectorBody))
		for _, spelling := range []string{
			base64.RawStdEncoding.EncodeToString(mac),
			strings.ToLower(shopifyVectorSignature),
			"sha256=" + shopifyVectorSignature,
			" " + shopifyVectorSignature,
		} {
			_, err := shopify.Verify([]byte(shopifyVectorBody), shopifyVectorHeader(spelling))
			requireRejected(t, err, ErrSignatureInvalid, shopifyVectorSecret)
		}
	})

	t.Run("WebhookIDIsKeptWhenTheBodyIsNotJSON", func(t *testing.T) {
		t.Parallel()
		body := []byte("foo=bar")
		delivery, err := newTestShopify(t, shopifyVectorSecret).Verify(body,
			shopifyVectorHeader(sign.Shopify(shopifyVectorSecret, body)))
		require.NoError(t, err)
		event := requireOneEvent(t, delivery)
		require.ErrorContains(t, event.ParseError, "body is not JSON")
		require.Equal(t, Event{ID: "123456789", Type: "products/create", ParseError: event.ParseError}, event)
	})

	t.Run("MissingWebhookIDIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		header := shopifyVectorHeader(shopifyVectorSignature)
		header.Del("X-Shopify-Webhook-Id")
		delivery, err := newTestShopify(t, shopifyVectorSecret).Verify([]byte(shopifyVectorBody), header)
		require.NoError(t, err)
		event := requireOneEvent(t, delivery)
		require.ErrorContains(t, event.ParseError, "header X-Shopify-Webhook-Id is missing or empty")
		require.Equal(t, "products/create", event.Type)
	})
}

// FuzzShopifyVerify checks that Verify never panics, that every refusal
// wraps a sentinel without quoting the secret, and that whatever verifies
// carries exactly the genuine signature.
func FuzzShopifyVerify(f *testing.F) {
	f.Add([]byte(shopifyVectorBody), shopifyVectorSignature, "123456789")
	f.Add([]byte(shopifyVectorBody), shopifyVectorSignature[:42]+"h=", "123456789")
	f.Add([]byte("not json"), sign.Shopify(shopifyVectorSecret, []byte("not json")), "")
	f.Add([]byte{}, sign.Shopify(shopifyVectorSecret, nil), "1")
	f.Add([]byte(`{"a":"\u0000"}`), "", "")
	shopify := newTestShopify(f, shopifyVectorSecret)

	f.Fuzz(func(t *testing.T, body []byte, signature, webhookID string) {
		header := shopifyVectorHeader(signature)
		header.Set("X-Shopify-Webhook-Id", webhookID)
		delivery, err := shopify.Verify(body, header)
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), shopifyVectorSecret)
			return
		}
		require.Equal(t, base64.StdEncoding.EncodeToString(referenceHMAC([]byte(shopifyVectorSecret), body)), signature)
		event := requireOneEvent(t, delivery)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
			require.Equal(t, webhookID, event.ID)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}
