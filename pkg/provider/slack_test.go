package provider

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Vector from /work/shared/providers.md §7: Slack's worked example in
// api.slack.com/authentication/verifying-requests-from-slack (a slash
// command, so a form body). Its timestamp is from 2018, so it runs with a
// clock pinned at the signing time.
const (
	slackVectorSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	slackVectorTimestamp = "1531420618"
	slackVectorBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackVectorSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

var slackVectorTime = time.Unix(1531420618, 0)

func init() {
	registerConformance(slackSigner)
}

func slackSigner() signer {
	get, set := headerSignature("X-Slack-Signature", "v0=")
	return signer{
		provider:      "slack",
		secrets:       [2]string{"8f742231b10e8888abcd99yyyzzz85a5", "0ld5ecret0ld5ecret0ld5ecret0ld5e"},
		unknownSecret: "unknownunknownunknownunknownunkn",
		body:          slackEventBody,
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			ts := strconv.FormatInt(at.Unix(), 10)
			mac := referenceHMAC([]byte(secret), []byte("v0:"+ts+":"+string(body)))
			return request{header: slackHeader("v0="+hex.EncodeToString(mac), ts), body: body}
		},
		want:            wantOne("app_mention"),
		signature:       get,
		setSignature:    set,
		decode:          hex.DecodeString,
		encode:          hex.EncodeToString,
		signatureHeader: "X-Slack-Signature",
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, "X-Slack-Signature", "v0=", "v1=", "V0=", "v0:", "v0 =", "", "sha256=", "v0==")
		},
		timestamped:     true,
		timestampHeader: "X-Slack-Request-Timestamp",
		idFromBody:      true,
	}
}

// slackEventBody is an Events API event_callback with event_id id.
func slackEventBody(ids ...string) []byte {
	return []byte(`{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention",` +
		`"user":"U123ABC456","text":"hi","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522000016"},` +
		`"type":"event_callback","event_id":"` + ids[0] + `","event_time":1515449522}`)
}

// slackHeader returns a Slack request's headers.
func slackHeader(signature, timestamp string) http.Header {
	header := http.Header{}
	header.Set("X-Slack-Signature", signature)
	header.Set("X-Slack-Request-Timestamp", timestamp)
	header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	return header
}

func newTestSlack(t testing.TB, now time.Time, secrets ...string) *slackVerifier {
	t.Helper()
	slack, err := newSlackVerifier(pinnedConfig(now, secrets...))
	require.NoError(t, err)
	return slack
}

func TestSlack(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorVerifies", func(t *testing.T) {
		t.Parallel()
		delivery, err := newTestSlack(t, slackVectorTime, slackVectorSecret).Verify([]byte(slackVectorBody),
			slackHeader(slackVectorSignature, slackVectorTimestamp))
		require.NoError(t, err)
		event := requireOneEvent(t, delivery) // authentic; a slash command is a form, not JSON
		require.ErrorContains(t, event.ParseError, "body is not JSON")
		require.Nil(t, event.Payload)
		require.Equal(t, map[string]string{
			"X-Slack-Signature":         slackVectorSignature,
			"X-Slack-Request-Timestamp": slackVectorTimestamp,
		}, delivery.Headers)
	})

	t.Run("SignSlackReproducesTheOfficialVector", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, slackVectorSignature, sign.Slack(slackVectorSecret, slackVectorTime, []byte(slackVectorBody)))
		require.Equal(t, strings.TrimPrefix(slackVectorSignature, "v0="), hex.EncodeToString(
			referenceHMAC([]byte(slackVectorSecret), []byte("v0:"+slackVectorTimestamp+":"+slackVectorBody))))
	})

	t.Run("OfficialVectorIsStaleOnTheWallClock", func(t *testing.T) {
		t.Parallel()
		slack, err := newSlackVerifier(&Config{Secrets: []string{slackVectorSecret}})
		require.NoError(t, err)
		_, err = slack.Verify([]byte(slackVectorBody), slackHeader(slackVectorSignature, slackVectorTimestamp))
		requireRejected(t, err, ErrTimestampOutsideTolerance, slackVectorSecret)
	})

	t.Run("EventsAPIEventHasItsIDAndInnerType", func(t *testing.T) {
		t.Parallel()
		body := slackEventBody("Ev0PV52K21")
		delivery, err := newTestSlack(t, testNow, slackVectorSecret).Verify(body,
			slackHeader(sign.Slack(slackVectorSecret, testNow, body), strconv.FormatInt(testNow.Unix(), 10)))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "Ev0PV52K21", Type: "app_mention", Payload: body}, requireOneEvent(t, delivery))
	})

	t.Run("OuterTypeWhenThereIsNoInnerEvent", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"type":"app_rate_limited","token":"x","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1","event_id":"Ev1"}`)
		delivery, err := newTestSlack(t, testNow, slackVectorSecret).Verify(body,
			slackHeader(sign.Slack(slackVectorSecret, testNow, body), strconv.FormatInt(testNow.Unix(), 10)))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "Ev1", Type: "app_rate_limited", Payload: body}, requireOneEvent(t, delivery))
	})

	t.Run("URLVerificationIsAnsweredWithTheChallenge", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
		delivery, err := newTestSlack(t, testNow, slackVectorSecret).Verify(body,
			slackHeader(sign.Slack(slackVectorSecret, testNow, body), strconv.FormatInt(testNow.Unix(), 10)))
		require.NoError(t, err)
		require.Empty(t, delivery.Events)
		require.Equal(t, &Reply{
			Status: http.StatusOK, ContentType: "text/plain",
			Body: []byte("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"),
		}, delivery.Reply)
	})

	t.Run("ForgedURLVerificationIsNotAnswered", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"challenge":"c","type":"url_verification"}`)
		_, err := newTestSlack(t, testNow, slackVectorSecret).Verify(body,
			slackHeader(sign.Slack("another secret", testNow, body), strconv.FormatInt(testNow.Unix(), 10)))
		requireRejected(t, err, ErrSignatureInvalid, slackVectorSecret)
	})

	t.Run("URLVerificationWithoutAChallengeIsAnEvent", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"challenge":42,"type":"url_verification"}`)
		delivery, err := newTestSlack(t, testNow, slackVectorSecret).Verify(body,
			slackHeader(sign.Slack(slackVectorSecret, testNow, body), strconv.FormatInt(testNow.Unix(), 10)))
		require.NoError(t, err)
		require.Nil(t, delivery.Reply)
		require.ErrorContains(t, requireOneEvent(t, delivery).ParseError, "no event id")
	})

	t.Run("PresetAnswersWithinSlacksThreeSeconds", func(t *testing.T) {
		t.Parallel()
		preset, ok := PresetFor("slack")
		require.True(t, ok)
		require.Equal(t, Preset{AckTimeout: 2500 * time.Millisecond}, preset)
	})

	t.Run("MalformedTimestampIsInvalid", func(t *testing.T) {
		t.Parallel()
		slack := newTestSlack(t, slackVectorTime, slackVectorSecret)
		for _, ts := range []string{"+1531420618", "1531420618.0", "01531420618", "1531420618 ", "x"} {
			_, err := slack.Verify([]byte(slackVectorBody), slackHeader(slackVectorSignature, ts))
			requireRejected(t, err, ErrSignatureInvalid, slackVectorSecret)
		}
	})
}

// FuzzSlackVerify checks that Verify never panics, that every refusal wraps
// a sentinel without quoting the secret, and that whatever verifies carries
// exactly the genuine signature.
func FuzzSlackVerify(f *testing.F) {
	f.Add([]byte(slackVectorBody), slackVectorSignature, slackVectorTimestamp)
	f.Add(slackEventBody("Ev1"), sign.Slack(slackVectorSecret, slackVectorTime, slackEventBody("Ev1")), slackVectorTimestamp)
	challenge := []byte(`{"challenge":"x","type":"url_verification"}`)
	f.Add(challenge, sign.Slack(slackVectorSecret, slackVectorTime, challenge), slackVectorTimestamp)
	f.Add([]byte(slackVectorBody), strings.ToUpper(slackVectorSignature), slackVectorTimestamp)
	f.Add([]byte{}, "v0=", "")
	slack := newTestSlack(f, slackVectorTime, slackVectorSecret)

	f.Fuzz(func(t *testing.T, body []byte, signature, timestamp string) {
		delivery, err := slack.Verify(body, slackHeader(signature, timestamp))
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), slackVectorSecret)
			return
		}
		mac := referenceHMAC([]byte(slackVectorSecret), []byte("v0:"+timestamp+":"+string(body)))
		require.Equal(t, "v0="+hex.EncodeToString(mac), signature)
		if delivery.Reply != nil {
			var handshake struct{ Type, Challenge string }
			require.NoError(t, json.Unmarshal(body, &handshake))
			require.Equal(t, "url_verification", handshake.Type)
			require.Equal(t, handshake.Challenge, string(delivery.Reply.Body))
			require.Empty(t, delivery.Events)
			return
		}
		event := requireOneEvent(t, delivery)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}
