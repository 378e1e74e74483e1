package sign

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Stripe returns the Stripe-Signature header value "t=<unix>,v1=<hex>"
// that Stripe would send for body signed with secret at t.
func Stripe(secret string, t time.Time, body []byte) string {
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := macSHA256([]byte(secret), []byte(timestamp), []byte("."), body)
	return "t=" + timestamp + ",v1=" + hex.EncodeToString(mac)
}

// GitHub returns the X-Hub-Signature-256 header value "sha256=<hex>"
// GitHub would send for body signed with secret.
func GitHub(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(macSHA256([]byte(secret), body))
}

// Shopify returns the X-Shopify-Hmac-Sha256 header value Shopify would send
// for body signed with secret.
func Shopify(secret string, body []byte) string {
	return base64.StdEncoding.EncodeToString(macSHA256([]byte(secret), body))
}

// Slack returns the X-Slack-Signature header value "v0=<hex>" Slack would
// send for body signed with secret at t; X-Slack-Request-Timestamp is t in
// unix seconds.
func Slack(secret string, t time.Time, body []byte) string {
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := macSHA256([]byte(secret), []byte("v0:"), []byte(timestamp), []byte(":"), body)
	return "v0=" + hex.EncodeToString(mac)
}

// Paddle returns the Paddle-Signature header value "ts=<unix>;h1=<hex>"
// Paddle would send for body signed with secret at t.
func Paddle(secret string, t time.Time, body []byte) string {
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := macSHA256([]byte(secret), []byte(timestamp), []byte(":"), body)
	return "ts=" + timestamp + ";h1=" + hex.EncodeToString(mac)
}

// Square returns the x-square-hmacsha256-signature header value Square
// would send for body delivered to url, signed with signatureKey.
func Square(signatureKey, url string, body []byte) string {
	return base64.StdEncoding.EncodeToString(macSHA256([]byte(signatureKey), []byte(url), body))
}

// Marqeta returns the X-Marqeta-Signature header value Marqeta would send
// for body signed with secret: the lowercase hex HMAC under algorithm
// ("sha256" or "" for HMAC-SHA256, "sha1" for HMAC-SHA1). Marqeta also
// requires Basic Auth, which webhook.Headers adds from the source's config.
func Marqeta(algorithm, secret string, body []byte) (string, error) {
	newHash, err := HashNamed(algorithm, "sha1", "sha256")
	if err != nil {
		return "", fmt.Errorf("marqeta: %w", err)
	}
	return hex.EncodeToString(MAC(newHash, []byte(secret), body)), nil
}

// standardWebhooksSecretPrefix starts a Standard Webhooks secret.
const standardWebhooksSecretPrefix = "whsec_"

// StandardWebhooksKey decodes a "whsec_<base64>" (or bare base64) secret.
// Its errors never quote the secret.
func StandardWebhooksKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, standardWebhooksSecretPrefix))
	if err != nil {
		return nil, errors.New("secret is not whsec_ followed by standard base64")
	}
	if len(key) == 0 {
		return nil, errors.New("secret has an empty key")
	}
	return key, nil
}

// StandardWebhooks returns the webhook-signature header value "v1,<base64>"
// for a delivery of body with webhook-id msgID and webhook-timestamp t,
// signed with secret ("whsec_<base64>"). It fails only on a malformed
// secret.
func StandardWebhooks(secret, msgID string, t time.Time, body []byte) (string, error) {
	key, err := StandardWebhooksKey(secret)
	if err != nil {
		return "", fmt.Errorf("standardwebhooks: %w", err)
	}
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := macSHA256(key, []byte(msgID), []byte("."), []byte(timestamp), []byte("."), body)
	return "v1," + base64.StdEncoding.EncodeToString(mac), nil
}
