package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
)

// Headers of a Shopify webhook delivery.
const (
	shopifyHmacHeader      = "X-Shopify-Hmac-Sha256"
	shopifyTopicHeader     = "X-Shopify-Topic"
	shopifyWebhookIDHeader = "X-Shopify-Webhook-Id"
)

// shopifyAuditHeaders are the headers a Shopify delivery keeps: the
// signature, the ids of the delivery and of the event, and what orders it.
var shopifyAuditHeaders = []string{
	shopifyHmacHeader,
	shopifyTopicHeader,
	"X-Shopify-Shop-Domain",
	shopifyWebhookIDHeader,
	"X-Shopify-Event-Id",
	"X-Shopify-Api-Version",
	"X-Shopify-Triggered-At",
}

func init() {
	register("shopify", adapt(newShopifyVerifier), Preset{})
}

// shopifyVerifier verifies Shopify webhook deliveries. X-Shopify-Hmac-Sha256 is
// the standard base64 of HMAC-SHA256(app client secret, raw body). Nothing
// signed carries a time, so there is no timestamp tolerance and a captured
// delivery can be replayed: the inbox's dedup key is what stops a replay.
//
// Only the canonical base64 spelling of the signature is accepted: Go's
// base64 decoder ignores the unused low bits of the last character and skips
// newlines, so a lenient decoding would accept several spellings of one
// signature.
//
// Shopify sends one event per delivery. Its ID is X-Shopify-Webhook-Id (the
// delivery; the same event sent to two subscriptions has two) and its Type
// is X-Shopify-Topic ("orders/create").
type shopifyVerifier struct {
	keys keyring
}

// newShopifyVerifier returns a Shopify verifier for the app client secrets in
// config. Config.Tolerance and Config.Now are not used.
func newShopifyVerifier(config *Config) (*shopifyVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("shopify: %w", err)
	}
	return &shopifyVerifier{keys: newKeyring(sha256.New, config.Secrets)}, nil
}

// Verify implements Verifier.
func (s *shopifyVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	signature, err := requiredHeader(header, shopifyHmacHeader)
	if err != nil {
		return nil, fmt.Errorf("shopify: %w", err)
	}
	if mac, ok := decodeBase64MAC(signature, sha256.Size); !ok || !s.keys.matches([][]byte{mac}, body) {
		return nil, fmt.Errorf("shopify: %s matches no configured secret: %w", shopifyHmacHeader, ErrSignatureInvalid)
	}
	p := parsePayload(body)
	event := p.event(body, header.Get(shopifyWebhookIDHeader), header.Get(shopifyTopicHeader),
		"header "+shopifyWebhookIDHeader)
	event.TwinKey = shopifyTwinKey(header)
	return newDelivery(event, header, shopifyAuditHeaders...), nil
}

// shopifyTwinKey identifies the logical event behind a delivery: Shopify
// sends one webhook, with its own X-Shopify-Webhook-Id, per subscription to
// a topic, all with the same X-Shopify-Event-Id. The shop domain is part of
// the key because one app endpoint serves many shops. Empty when a header is
// missing or the key cannot be stored.
func shopifyTwinKey(header http.Header) string {
	domain, eventID, topic := header.Get("X-Shopify-Shop-Domain"), header.Get("X-Shopify-Event-Id"), header.Get(shopifyTopicHeader)
	if domain == "" || eventID == "" || topic == "" {
		return ""
	}
	return storableKey(domain + "|" + eventID + "|" + topic)
}
