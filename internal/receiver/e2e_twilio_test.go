package receiver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// twilioStored returns the payload and raw body stored for an event.
func (b *e2eBundle) twilioStored(t *testing.T, eventID string) (map[string]any, []byte) {
	t.Helper()
	var payload *string
	var body []byte
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT payload::text, body FROM webhook_inbox JOIN webhook_inbox_delivery ON inbox_id = id WHERE event_id = $1`, eventID).Scan(&payload, &body))
	if payload == nil {
		return nil, body
	}
	var decoded map[string]any
	require.NoError(t, json.Unmarshal([]byte(*payload), &decoded))
	return decoded, body
}

// twilioForm posts params as a Twilio form callback signed with token for
// webhookURL, with an idempotency token when idem is set.
func (b *e2eBundle) twilioForm(t *testing.T, source, token, webhookURL string, params url.Values, idem string) e2eReply {
	t.Helper()
	header := http.Header{
		"Content-Type":       {"application/x-www-form-urlencoded"},
		"X-Twilio-Signature": {sign.Twilio(token, webhookURL, params)},
	}
	if idem != "" {
		header.Set("I-Twilio-Idempotency-Token", idem)
	}
	return b.post(t, source, header, []byte(params.Encode()))
}

func TestEndToEndTwilio(t *testing.T) {
	t.Parallel()
	const (
		token   = "twilio_e2e_auth_token"
		hookURL = "https://hooks.example.com/webhooks/sms?tenant=acme"
	)
	b := setupE2E(t, config.SourceConfig{Name: "sms", Provider: "twilio", Secrets: []config.Secret{"twilio_old_token", token}, URL: hookURL})
	status := func(sid, status string) url.Values {
		return url.Values{
			"MessageSid": {sid}, "SmsSid": {sid}, "MessageStatus": {status}, "SmsStatus": {status},
			"AccountSid": {"AC1"}, "From": {"+15005550006"}, "To": {"+14155552671"}, "ApiVersion": {"2010-04-01"},
		}
	}

	// A status callback with Twilio's idempotency token, and Twilio's retry.
	r := b.twilioForm(t, "sms", token, hookURL, status("SM1", "sent"), "idem-sent-1")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	r = b.twilioForm(t, "sms", token, hookURL, status("SM1", "sent"), "idem-sent-1")
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// Without a token, the Sid and status are the key: a retry is a duplicate.
	r = b.twilioForm(t, "sms", token, hookURL, status("SM1", "delivered"), "")
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	r = b.twilioForm(t, "sms", "twilio_old_token", hookURL, status("SM1", "delivered"), "")
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// Forgeries: another token, another URL, tampered parameters.
	r = b.twilioForm(t, "sms", "wrong_token", hookURL, status("SM2", "sent"), "idem-forged")
	require.Equal(t, http.StatusUnauthorized, r.Status)
	r = b.twilioForm(t, "sms", token, "https://hooks.example.com/webhooks/sms", status("SM2", "sent"), "idem-forged")
	require.Equal(t, http.StatusUnauthorized, r.Status)
	header := http.Header{"X-Twilio-Signature": {sign.Twilio(token, hookURL, status("SM2", "sent"))}}
	r = b.post(t, "sms", header, []byte(status("SM2", "failed").Encode()))
	require.Equal(t, http.StatusUnauthorized, r.Status)

	// A JSON delivery (an Event Streams CloudEvent) signed with its bodySHA256.
	body := []byte(`{"specversion":"1.0","id":"EZ1","type":"com.twilio.messaging.message.delivered","data":{"messageSid":"SM1"}}`)
	r = b.post(t, "sms", http.Header{
		"Content-Type": {"application/json"}, "X-Twilio-Signature": {sign.TwilioJSON(token, hookURL, body)},
	}, body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	require.Equal(t, []e2eRow{
		{EventID: "idem-sent-1", EventType: "message.sent", Status: "pending", HasJob: true},
		{EventID: "SM1:delivered", EventType: "message.delivered", Status: "pending", HasJob: true},
		{EventID: "EZ1", EventType: "com.twilio.messaging.message.delivered", Status: "pending", HasJob: true},
	}, b.rows(t))

	// The form body is stored raw, and its parameters as a JSON object.
	payload, raw := b.twilioStored(t, "idem-sent-1")
	require.Equal(t, status("SM1", "sent").Encode(), string(raw))
	require.Equal(t, map[string]any{
		"MessageSid": "SM1", "SmsSid": "SM1", "MessageStatus": "sent", "SmsStatus": "sent",
		"AccountSid": "AC1", "From": "+15005550006", "To": "+14155552671", "ApiVersion": "2010-04-01",
	}, payload)
}

// TestEndToEndTwilioGoldenVectors replays twilio-go's request validator
// vectors (/work/shared/providers.md §8; twilio/twilio-go
// client/request_validator_test.go) through the receiver: there is no
// official Twilio signer in Go, so the deliveries carry the vectors'
// signatures as published.
func TestEndToEndTwilioGoldenVectors(t *testing.T) {
	t.Parallel()
	b := setupE2E(t,
		config.SourceConfig{Name: "voice", Provider: "twilio", Secrets: []config.Secret{"12345"}, URL: "https://mycompany.com/myapp.php?foo=1&bar=2"},
		config.SourceConfig{Name: "bare", Provider: "twilio", Secrets: []config.Secret{"12345"}, URL: "https://mycompany.com/myapp.php"},
	)
	form := url.Values{
		"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"},
		"Caller": {"+14158675309"}, "From": {"+14158675309"},
	}.Encode()
	for _, signature := range []string{"RSOYDt4T1cUTdK1PDd93/VVr8B8=", "kvajT1Ptam85bY51eRf/AJRuM3w="} { // without and with :443
		r := b.post(t, "voice", http.Header{
			"Content-Type": {"application/x-www-form-urlencoded"}, "X-Twilio-Signature": {signature},
		}, []byte(form))
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	jsonBody := []byte(`{"property": "value", "boolean": true}`)
	for source, signature := range map[string]string{"voice": "a9nBmqA0ju/hNViExpshrM61xv4=", "bare": "y77kIzt2vzLz71DgmJGsen2scGs="} {
		r := b.post(t, source, http.Header{
			"Content-Type": {"application/json"}, "X-Twilio-Signature": {signature}, "I-Twilio-Idempotency-Token": {"idem-" + source},
		}, jsonBody)
		require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t), source)
	}
	r := b.post(t, "bare", http.Header{"X-Twilio-Signature": {"RSOYDt4T1cUTdK1PDd93/VVr8B8="}}, []byte(form))
	require.Equal(t, http.StatusUnauthorized, r.Status)

	rows := b.rows(t)
	require.Len(t, rows, 3)
	// The two form deliveries are one call without a status: one row.
	require.Equal(t, e2eRow{EventID: "CA1234567890ABCDE", EventType: "call", Status: "pending", HasJob: true}, rows[0])
	payload, _ := b.twilioStored(t, "CA1234567890ABCDE")
	require.Equal(t, "1234", payload["Digits"])
	require.ElementsMatch(t, []string{"idem-voice", "idem-bare"}, []string{rows[1].EventID, rows[2].EventID})
}

func TestEndToEndTwilioUnstorableFormIsRecordedAsFailed(t *testing.T) {
	t.Parallel()
	const token, hookURL = "twilio_e2e_auth_token", "https://hooks.example.com/sms"
	b := setupE2E(t, config.SourceConfig{Name: "sms", Provider: "twilio", Secrets: []config.Secret{token}, URL: hookURL})
	params := url.Values{"MessageSid": {"SM9"}, "MessageStatus": {"received"}, "Body": {"caf\xe9 \x00"}}
	r := b.twilioForm(t, "sms", token, hookURL, params, "idem-bad")
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	rows := b.rows(t)
	require.Len(t, rows, 1)
	require.Equal(t, "idem-bad", rows[0].EventID)
	require.Equal(t, "failed", rows[0].Status)
	require.Contains(t, rows[0].LastError, "not valid UTF-8")
	payload, raw := b.twilioStored(t, "idem-bad")
	require.Nil(t, payload)
	require.Equal(t, params.Encode(), string(raw))
}
