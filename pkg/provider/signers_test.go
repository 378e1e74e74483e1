package provider

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"
)

// signer signs deliveries the way one provider does, for the conformance
// suite. Signatures come from the providers' own SDKs where one exists
// (stripe-go, the Standard Webhooks Go library) and from the tests' own HMAC
// otherwise, never from the Sign* helpers under test.
type signer struct {
	// provider is the registry name.
	provider string
	// secrets are an old and a new secret, both configured during a rotation.
	secrets [2]string
	// unknownSecret is well formed but never configured.
	unknownSecret string
	// timestamped is set when the scheme signs a timestamp.
	timestamped bool
	// idFromBody is set when the event id is the body's "id" (Stripe); the
	// id is then unknown when the body cannot be parsed.
	idFromBody bool
	// signatureHeader names the header carrying the signature.
	signatureHeader string
	// sign returns the headers of a delivery of body with event id id
	// (omitted when empty) and type "order.created", signed with secret at at.
	sign func(t *testing.T, secret string, at time.Time, id string, body []byte) http.Header
	// signature and setSignature read and replace the encoded signature.
	signature    func(header http.Header) string
	setSignature func(header http.Header, encoded string)
	// decode and encode convert between a signature's bytes and its encoding.
	decode func(encoded string) ([]byte, error)
	encode func(mac []byte) string
	// ignoredVersions returns copies of header whose signature is under scheme
	// versions that must be ignored; nil when the scheme has no versions.
	ignoredVersions func(header http.Header) []http.Header
}

// conformanceSigners returns a signer for every registered provider.
func conformanceSigners() []signer {
	return []signer{stripeSigner(), shopifySigner(), standardWebhooksSigner()}
}

func stripeSigner() signer {
	const prefix = ",v1="
	return signer{
		provider:        "stripe",
		secrets:         [2]string{"whsec_old_secret", "whsec_new_secret"},
		unknownSecret:   "whsec_unknown_secret",
		timestamped:     true,
		idFromBody:      true,
		signatureHeader: "Stripe-Signature",
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) http.Header {
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
			return http.Header{"Stripe-Signature": {signed.Header}}
		},
		signature: func(header http.Header) string {
			_, encoded, _ := strings.Cut(header.Get("Stripe-Signature"), prefix)
			return encoded
		},
		setSignature: func(header http.Header, encoded string) {
			timestamp, _, _ := strings.Cut(header.Get("Stripe-Signature"), prefix)
			header.Set("Stripe-Signature", timestamp+prefix+encoded)
		},
		decode: hex.DecodeString,
		encode: hex.EncodeToString,
		ignoredVersions: func(header http.Header) []http.Header {
			var out []http.Header
			for _, version := range []string{"v0", "v2", "V1", "v1 ", "", "v"} {
				value := strings.Replace(header.Get("Stripe-Signature"), prefix, ","+version+"=", 1)
				out = append(out, http.Header{"Stripe-Signature": {value}})
			}
			return out
		},
	}
}

func shopifySigner() signer {
	return signer{
		provider:        "shopify",
		secrets:         [2]string{"old_app_secret", "new_app_secret"},
		unknownSecret:   "unknown_app_secret",
		signatureHeader: "X-Shopify-Hmac-Sha256",
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) http.Header {
			header := http.Header{}
			header.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(referenceHMAC([]byte(secret), body)))
			header.Set("X-Shopify-Topic", "order.created")
			header.Set("X-Shopify-Shop-Domain", "shop1.myshopify.io")
			header.Set("X-Shopify-Api-Version", "2025-07")
			header.Set("X-Shopify-Triggered-At", at.UTC().Format(time.RFC3339Nano))
			if id != "" {
				header.Set("X-Shopify-Webhook-Id", id)
			}
			return header
		},
		signature: func(header http.Header) string { return header.Get("X-Shopify-Hmac-Sha256") },
		setSignature: func(header http.Header, encoded string) {
			header.Set("X-Shopify-Hmac-Sha256", encoded)
		},
		decode: base64.StdEncoding.DecodeString,
		encode: base64.StdEncoding.EncodeToString,
	}
}

func standardWebhooksSigner() signer {
	return signer{
		provider: "standardwebhooks",
		// Secrets of the Go and Rust libraries' vectors.
		secrets:         [2]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"},
		unknownSecret:   "whsec_" + base64.StdEncoding.EncodeToString([]byte("an unknown 24-byte key!!")),
		timestamped:     true,
		signatureHeader: "webhook-signature",
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) http.Header {
			wh, err := standardwebhooks.NewWebhook(secret)
			require.NoError(t, err)
			signature, err := wh.Sign(id, at, body)
			require.NoError(t, err)
			header := http.Header{}
			header.Set("webhook-signature", signature)
			header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
			if id != "" {
				header.Set("webhook-id", id)
			}
			return header
		},
		signature: func(header http.Header) string {
			return strings.TrimPrefix(header.Get("webhook-signature"), "v1,")
		},
		setSignature: func(header http.Header, encoded string) {
			header.Set("webhook-signature", "v1,"+encoded)
		},
		decode: base64.StdEncoding.DecodeString,
		encode: base64.StdEncoding.EncodeToString,
		ignoredVersions: func(header http.Header) []http.Header {
			var out []http.Header
			encoded := strings.TrimPrefix(header.Get("webhook-signature"), "v1,")
			for _, version := range []string{"v2", "v1a", "v0", "V1", "v1 ", ""} {
				copied := header.Clone()
				copied.Set("webhook-signature", version+","+encoded)
				out = append(out, copied)
			}
			return out
		},
	}
}
