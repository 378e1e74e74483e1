package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Headers of a Slack request, and the version prefix of its signature.
const (
	slackSignatureHeader = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
	slackVersion         = "v0"
)

// slackAckTimeout is the slack preset's ack timeout: Slack gives up after
// 3 seconds and retries, so the commit must be answered well before that.
const slackAckTimeout = 2500 * time.Millisecond

// slackAuditHeaders are the headers a Slack delivery keeps: the signature,
// its timestamp, and what tells a retry from a first attempt.
var slackAuditHeaders = []string{
	slackSignatureHeader,
	slackTimestampHeader,
	"X-Slack-Retry-Num",
	"X-Slack-Retry-Reason",
}

func init() {
	register("slack", adapt(newSlackVerifier), Preset{AckTimeout: slackAckTimeout})
}

// slackVerifier verifies requests from Slack (Events API, slash commands,
// interactivity). X-Slack-Signature is "v0=" followed by the lowercase hex
// HMAC-SHA256 of "v0:<X-Slack-Request-Timestamp>:<raw body>", keyed with the
// app's signing secret. The raw bytes are signed whatever the Content-Type
// (JSON for events, a form for commands). Config.Tolerance applies to the
// timestamp in both directions, checked after the signature.
//
// An authentic url_verification request ({"type":"url_verification",
// "challenge":"…"}), sent when the request URL is configured, is a
// handshake: the delivery carries a Reply echoing the challenge as
// text/plain and no events, so it is never stored.
//
// Otherwise Slack sends one event per request. Its ID is the body's
// "event_id" ("Ev…"), which Slack's retries keep, and its Type is the
// body's "event"."type" ("app_mention"), or the body's "type" when there is
// no inner event. A form-encoded request (a slash command) is authentic but
// not JSON: its event carries a ParseError.
type slackVerifier struct {
	keys      keyring
	tolerance time.Duration
	now       func() time.Time
}

// newSlackVerifier returns a Slack verifier for the signing secrets in config.
// Config.Tolerance and Config.Now apply.
func newSlackVerifier(config *Config) (*slackVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	config = config.withDefaults()
	return &slackVerifier{keys: newKeyring(sha256.New, config.Secrets), tolerance: config.Tolerance, now: config.Now}, nil
}

// Verify implements Verifier.
func (s *slackVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	value, err := requiredHeader(header, slackSignatureHeader)
	if err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	timestamp, signedAt, err := signedTimestamp(header, slackTimestampHeader)
	if err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	encoded, ok := strings.CutPrefix(value, slackVersion+"=")
	if !ok {
		return nil, fmt.Errorf("slack: %s is not a %s signature: %w", slackSignatureHeader, slackVersion, ErrSignatureInvalid)
	}
	mac, ok := decodeHexMAC(encoded, sha256.Size)
	if !ok {
		return nil, fmt.Errorf("slack: %s is not 64 lowercase hex digits: %w", slackSignatureHeader, ErrSignatureInvalid)
	}
	if !s.keys.matches([][]byte{mac}, []byte(slackVersion+":"), []byte(timestamp), []byte(":"), body) {
		return nil, fmt.Errorf("slack: %s matches no configured secret: %w", slackSignatureHeader, ErrSignatureInvalid)
	}
	if err := checkTimestamp(s.now(), signedAt, s.tolerance); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	p := parsePayload(body)
	if challenge := p.str("challenge"); p.str("type") == "url_verification" && challenge != "" {
		return &Delivery{
			Headers: auditHeaders(header, slackAuditHeaders...),
			Reply:   &Reply{Status: http.StatusOK, ContentType: "text/plain", Body: []byte(challenge)},
		}, nil
	}
	eventType := p.path("event", "type")
	if eventType == "" {
		eventType = p.str("type")
	}
	event := p.event(body, p.str("event_id"), eventType, `the body's "event_id"`)
	return newDelivery(event, header, slackAuditHeaders...), nil
}
