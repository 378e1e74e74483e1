package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// headerSigners holds each provider's signing function, by config name, and
// bodySigners those of providers that sign inside the body, which Sign runs
// first. provider's conformance suite requires one for every provider.
var (
	headerSigners = map[string]func(*Params) (http.Header, error){
		"adyen": func(p *Params) (http.Header, error) {
			return basicAuthHeader("adyen", p.Config)
		},
		"github": func(p *Params) (http.Header, error) {
			if err := p.requireHeaderKeys("github", true, true); err != nil {
				return nil, err
			}
			header := http.Header{}
			header.Set("X-Hub-Signature-256", sign.GitHub(p.Secret, p.Body))
			header.Set("X-GitHub-Delivery", p.EventID)
			header.Set("X-GitHub-Event", p.EventType)
			return header, nil
		},
		"hmac":    signHMAC,
		"marqeta": signMarqeta,
		"paddle": func(p *Params) (http.Header, error) {
			return http.Header{"Paddle-Signature": {sign.Paddle(p.Secret, p.Time, p.Body)}}, nil
		},
		"shopify": func(p *Params) (http.Header, error) {
			if err := p.requireHeaderKeys("shopify", true, true); err != nil {
				return nil, err
			}
			return http.Header{
				"X-Shopify-Hmac-Sha256": {sign.Shopify(p.Secret, p.Body)},
				"X-Shopify-Webhook-Id":  {p.EventID},
				"X-Shopify-Topic":       {p.EventType},
			}, nil
		},
		"slack": func(p *Params) (http.Header, error) {
			return http.Header{
				"X-Slack-Signature":         {sign.Slack(p.Secret, p.Time, p.Body)},
				"X-Slack-Request-Timestamp": {strconv.FormatInt(p.Time.Unix(), 10)},
			}, nil
		},
		"square": func(p *Params) (http.Header, error) {
			notificationURL, err := signingURL("square", p)
			if err != nil {
				return nil, err
			}
			return http.Header{"X-Square-Hmacsha256-Signature": {sign.Square(p.Secret, notificationURL, p.Body)}}, nil
		},
		"standardwebhooks": func(p *Params) (http.Header, error) {
			return signStandardWebhooks(p, "webhook-id", "webhook-timestamp", "webhook-signature")
		},
		"stripe": func(p *Params) (http.Header, error) {
			return http.Header{"Stripe-Signature": {sign.Stripe(p.Secret, p.Time, p.Body)}}, nil
		},
		"svix": func(p *Params) (http.Header, error) {
			return signStandardWebhooks(p, "svix-id", "svix-timestamp", "svix-signature")
		},
		"twilio": signTwilio,
	}
	bodySigners = map[string]func(*Params) ([]byte, error){
		// Adyen's signatures live in the body; its header signer adds Basic
		// Auth.
		"adyen": func(p *Params) ([]byte, error) { return sign.AdyenBody(p.Secret, p.Body) },
	}
)

// signStandardWebhooks returns the headers of p under the names of a
// Standard Webhooks header set.
func signStandardWebhooks(p *Params, idHeader, timestampHeader, signatureHeader string) (http.Header, error) {
	if err := p.requireHeaderKeys(p.Provider, true, false); err != nil {
		return nil, err
	}
	sig, err := sign.StandardWebhooks(p.Secret, p.EventID, p.Time, p.Body)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	header.Set(idHeader, p.EventID)
	header.Set(timestampHeader, strconv.FormatInt(p.Time.Unix(), 10))
	header.Set(signatureHeader, sig)
	return header, nil
}

// signMarqeta returns the Basic Auth Marqeta requires and, when a secret is
// given, its signature.
func signMarqeta(p *Params) (http.Header, error) {
	header, err := basicAuthHeader("marqeta", p.Config)
	if err != nil || p.Secret == "" {
		return header, err
	}
	signature, err := sign.Marqeta(p.Config.Algorithm, p.Secret, p.Body)
	if err != nil {
		return nil, err
	}
	header.Set("X-Marqeta-Signature", signature)
	return header, nil
}

// signTwilio signs a body that is valid JSON the JSON way, anything else as
// form parameters. It needs Config.URL; EventID, when set, is sent as
// I-Twilio-Idempotency-Token.
func signTwilio(p *Params) (http.Header, error) {
	webhookURL, err := signingURL("twilio", p)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	if json.Valid(p.Body) {
		header.Set("X-Twilio-Signature", sign.TwilioJSON(p.Secret, webhookURL, p.Body))
		header.Set("Content-Type", "application/json")
	} else {
		params, err := url.ParseQuery(string(p.Body))
		if err != nil {
			return nil, fmt.Errorf("twilio: body is neither JSON nor form parameters: %w", err)
		}
		header.Set("X-Twilio-Signature", sign.Twilio(p.Secret, webhookURL, params))
		header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if p.EventID != "" {
		header.Set("I-Twilio-Idempotency-Token", p.EventID)
	}
	return header, nil
}
