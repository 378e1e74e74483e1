package receiver_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// slackDelivery returns the headers Slack sends with body, signed now.
func slackDelivery(secret string, body []byte, retry string) http.Header {
	now := time.Now()
	header := http.Header{
		"X-Slack-Signature":         {sign.Slack(secret, now, body)},
		"X-Slack-Request-Timestamp": {strconv.FormatInt(now.Unix(), 10)},
		"Content-Type":              {"application/json"},
		"User-Agent":                {"Slackbot 1.0 (+https://api.slack.com/robots)"},
	}
	if retry != "" {
		header.Set("X-Slack-Retry-Num", retry)
		header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	return header
}

func TestEndToEndSlack(t *testing.T) {
	t.Parallel()
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	b := setupE2E(t, config.SourceConfig{Name: "slack", Provider: "slack", Secrets: []config.Secret{secret}})

	// Configuring the request URL: the challenge is echoed, nothing stored.
	handshake := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	r := b.post(t, "slack", slackDelivery(secret, handshake, ""), handshake)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "text/plain", r.Header.Get("Content-Type"))
	require.Equal(t, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", string(r.Body))

	// A forged handshake is not answered.
	r = b.post(t, "slack", slackDelivery("wrong secret", handshake, ""), handshake)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.NotContains(t, string(r.Body), "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")

	event := []byte(`{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention",` +
		`"user":"U123ABC456","text":"<@U0LAN0Z89> is it everything a river should be?","ts":"1515449522.000016",` +
		`"channel":"C123ABC456","event_ts":"1515449522000016"},"type":"event_callback","event_id":"Ev123ABC456","event_time":1515449522}`)
	r = b.post(t, "slack", slackDelivery(secret, event, ""), event)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// Slack's retry after a timeout keeps the event_id.
	r = b.post(t, "slack", slackDelivery(secret, event, "1"), event)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	r = b.post(t, "slack", slackDelivery("wrong secret", event, ""), event)
	require.Equal(t, http.StatusUnauthorized, r.Status)

	require.Equal(t, []e2eRow{{EventID: "Ev123ABC456", EventType: "app_mention", Status: "pending", HasJob: true}}, b.rows(t))
}
