package provider

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests below reuse the official vectors of the dedicated providers'
// tests (githubVector*, shopifyVector*, slackVector*, squareVectors[1]; their
// sources are named there), each configured as the generic provider would
// be for that sender.

const (
	hmacTestSecret         = "hmac_test_secret"
	hmacTestOldSecret      = "hmac_old_secret"
	hmacTestPassword       = "b4sic-p4ssw0rd"
	hmacTestAPIKey         = "api-key-0123456789"
	hmacTestTemplateHeader = "X-Signature"
)

// githubHMACConfig configures the generic provider like GitHub.
func githubHMACConfig() *HMACConfig {
	return &HMACConfig{
		Header: "X-Hub-Signature-256", Prefix: "sha256=", IDHeader: "X-GitHub-Delivery", TypeHeader: "X-GitHub-Event",
	}
}

// templatedHMACConfig signs "{timestamp}.{id}.{body}" like many senders do.
func templatedHMACConfig() *HMACConfig {
	return &HMACConfig{
		Header: hmacTestTemplateHeader, Prefix: "v1=", Template: "{timestamp}.{id}.{body}",
		TimestampHeader: "X-Timestamp", IDHeader: "X-Event-Id", TypePath: "type",
	}
}

func hmacTestConfig(now time.Time, hc *HMACConfig, secrets ...string) *Config {
	config := pinnedConfig(now, secrets...)
	config.HMAC = hc
	return config
}

func newTestHMAC(t testing.TB, config *Config) *hmacVerifier {
	t.Helper()
	v, err := newHMACVerifier(config)
	require.NoError(t, err)
	return v
}

// hmacReferenceMAC is the tests' own HMAC, independent of hmac.go.
func hmacReferenceMAC(newHash func() hash.Hash, key, message string) []byte {
	return referenceMAC(newHash, []byte(key), []byte(message))
}

// templatedHeader signs body as templatedHMACConfig describes.
func templatedHeader(secret string, at time.Time, id string, body []byte) http.Header {
	timestamp := strconv.FormatInt(at.Unix(), 10)
	header := http.Header{}
	header.Set(hmacTestTemplateHeader, "v1="+hex.EncodeToString(hmacReferenceMAC(sha256.New, secret, timestamp+"."+id+"."+string(body))))
	header.Set("X-Timestamp", timestamp)
	header.Set("X-Event-Id", id)
	return header
}

func init() {
	registerConformance(hmacSigner)
}

// hmacSigner delivers as a sender configured with a signed timestamp would:
// "sha256=" and the hex HMAC-SHA256 of "{timestamp}.{body}", the id in a
// header and the type in the body.
func hmacSigner() signer {
	const header, prefix, timestampHeader = "X-Signature", "sha256=", "X-Timestamp"
	get, set := headerSignature(header, prefix)
	return signer{
		provider:      "hmac",
		secrets:       [2]string{hmacTestOldSecret, hmacTestSecret},
		unknownSecret: "hmac_unknown_secret",
		body:          conformanceJSON,
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			timestamp := strconv.FormatInt(at.Unix(), 10)
			mac := hmacReferenceMAC(sha256.New, secret, timestamp+"."+string(body))
			h := http.Header{header: {prefix + hex.EncodeToString(mac)}, timestampHeader: {timestamp}}
			if id != "" {
				h.Set("X-Event-Id", id)
			}
			return request{header: h, body: body}
		},
		want:         wantOne("order.created"),
		signature:    get,
		setSignature: set,
		decode:       hex.DecodeString,
		encode:       hex.EncodeToString,
		config: func(secrets ...string) *Config {
			return &Config{Secrets: secrets, HMAC: &HMACConfig{
				Header: header, Prefix: prefix, Template: "{timestamp}.{body}", TimestampHeader: timestampHeader,
				IDHeader: "X-Event-Id", TypePath: "type",
			}}
		},
		signatureHeader: header,
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, header, prefix, "sha1=", "sha512=", "SHA256=", "sha256:", "sha256 =", "", "v1=")
		},
		timestamped:     true,
		timestampHeader: timestampHeader,
	}
}

func TestHMACGoldenVectors(t *testing.T) {
	t.Parallel()

	t.Run("GitHubVectorVerifies", func(t *testing.T) {
		t.Parallel()
		v := newTestHMAC(t, hmacTestConfig(testNow, githubHMACConfig(), githubVectorSecret))
		header := http.Header{
			"X-Hub-Signature-256": {githubVectorSignature}, "X-Github-Delivery": {"72d3162e"}, "X-Github-Event": {"ping"},
		}
		delivery, err := v.Verify([]byte(githubVectorBody), header)
		require.NoError(t, err)
		event := requireOneEvent(t, delivery)
		require.ErrorContains(t, event.ParseError, "not JSON")
		require.Equal(t, Event{ID: "72d3162e", Type: "ping", ParseError: event.ParseError}, event)
		require.Equal(t, map[string]string{
			"X-Hub-Signature-256": githubVectorSignature, "X-Github-Delivery": "72d3162e", "X-Github-Event": "ping",
		}, delivery.Headers)
	})

	t.Run("GitHubLegacySHA1Verifies", func(t *testing.T) {
		t.Parallel()
		config := hmacTestConfig(testNow, &HMACConfig{Header: "X-Hub-Signature", Prefix: "sha1=", IDHeader: "X-GitHub-Delivery"}, githubVectorSecret)
		config.Algorithm = "sha1"
		_, err := newTestHMAC(t, config).Verify([]byte(githubVectorBody), http.Header{"X-Hub-Signature": {githubVectorSHA1}})
		require.NoError(t, err)
	})

	t.Run("ShopifyVectorVerifiesInBase64", func(t *testing.T) {
		t.Parallel()
		config := hmacTestConfig(testNow, &HMACConfig{
			Header: "X-Shopify-Hmac-Sha256", Encoding: "base64", IDHeader: "X-Shopify-Webhook-Id", TypeHeader: "X-Shopify-Topic",
		}, shopifyVectorSecret)
		delivery, err := newTestHMAC(t, config).Verify([]byte(shopifyVectorBody), shopifyVectorHeader(shopifyVectorSignature))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "123456789", Type: "products/create", Payload: []byte(shopifyVectorBody)},
			requireOneEvent(t, delivery))
	})

	t.Run("SlackVectorVerifiesWithItsTimestamp", func(t *testing.T) {
		t.Parallel()
		signedAt := time.Unix(1531420618, 0)
		config := hmacTestConfig(signedAt.Add(time.Minute), &HMACConfig{
			Header: "X-Slack-Signature", Prefix: "v0=", Template: "v0:{timestamp}:{body}",
			TimestampHeader: "X-Slack-Request-Timestamp", IDHeader: "X-Request-Id",
		}, slackVectorSecret)
		header := http.Header{
			"X-Slack-Signature": {slackVectorSignature}, "X-Slack-Request-Timestamp": {slackVectorTimestamp}, "X-Request-Id": {"r1"},
		}
		delivery, err := newTestHMAC(t, config).Verify([]byte(slackVectorBody), header)
		require.NoError(t, err)
		require.Equal(t, "r1", requireOneEvent(t, delivery).ID)
		require.Equal(t, slackVectorTimestamp, delivery.Headers["X-Slack-Request-Timestamp"])

		config.Now = func() time.Time { return time.Unix(1531420618, 0).Add(DefaultTolerance + time.Second) }
		_, err = newTestHMAC(t, config).Verify([]byte(slackVectorBody), header)
		requireRejected(t, err, ErrTimestampOutsideTolerance, slackVectorSecret)
	})

	t.Run("SquareVectorVerifiesWithTheURLInTheTemplate", func(t *testing.T) {
		t.Parallel()
		config := hmacTestConfig(testNow, &HMACConfig{
			Header: "X-Square-Hmacsha256-Signature", Encoding: "base64", Template: "https://webhook.site/webhooks{body}",
			IDPath: "data.id", TypePath: "data.type",
		}, squareVectors[1].key)
		delivery, err := newTestHMAC(t, config).Verify([]byte(squareVectors[1].body),
			http.Header{"X-Square-Hmacsha256-Signature": {squareVectors[1].signature}})
		require.NoError(t, err)
		require.Equal(t, Event{ID: "fake_id", Type: "webhooks", Payload: []byte(squareVectors[1].body)}, requireOneEvent(t, delivery))
	})

	t.Run("SignHMACReproducesEveryVector", func(t *testing.T) {
		t.Parallel()
		header, err := SignHMAC(hmacTestConfig(testNow, githubHMACConfig()), githubVectorSecret, testNow, "d1", []byte(githubVectorBody))
		require.NoError(t, err)
		require.Equal(t, http.Header{"X-Hub-Signature-256": {githubVectorSignature}, "X-Github-Delivery": {"d1"}}, header)

		header, err = SignHMAC(hmacTestConfig(testNow, &HMACConfig{
			Header: "X-Slack-Signature", Prefix: "v0=", Template: "v0:{timestamp}:{body}",
			TimestampHeader: "X-Slack-Request-Timestamp", IDHeader: "X-Request-Id",
		}), slackVectorSecret, time.Unix(1531420618, 0), "", []byte(slackVectorBody))
		require.NoError(t, err)
		require.Equal(t, http.Header{
			"X-Slack-Signature": {slackVectorSignature}, "X-Slack-Request-Timestamp": {slackVectorTimestamp},
		}, header)

		header, err = SignHMAC(hmacTestConfig(testNow, &HMACConfig{
			Header: "X-Square-Hmacsha256-Signature", Encoding: "base64", Template: "https://webhook.site/webhooks{body}", IDPath: "data.id",
		}), squareVectors[1].key, testNow, "", []byte(squareVectors[1].body))
		require.NoError(t, err)
		require.Equal(t, squareVectors[1].signature, header.Get("X-Square-Hmacsha256-Signature"))
		require.Equal(t, squareVectors[1].signature, base64.StdEncoding.EncodeToString(
			hmacReferenceMAC(sha256.New, squareVectors[1].key, "https://webhook.site/webhooks"+squareVectors[1].body)))
	})
}

func TestHMACConfig(t *testing.T) {
	t.Parallel()

	t.Run("InvalidSettingsNameTheirKey", func(t *testing.T) {
		t.Parallel()
		with := func(edit func(*Config)) *Config {
			config := hmacTestConfig(testNow, templatedHMACConfig(), hmacTestSecret)
			edit(config)
			return config
		}
		for contains, config := range map[string]*Config{
			"hmac.header is required":             with(func(c *Config) { c.HMAC = nil }),
			"hmac.header is required: the header": with(func(c *Config) { c.HMAC.Header = "" }),
			`algorithm: "md5"`:                    with(func(c *Config) { c.Algorithm = "md5" }),
			`algorithm: "SHA256"`:                 with(func(c *Config) { c.Algorithm = "SHA256" }),
			`hmac.encoding "base32"`:              with(func(c *Config) { c.HMAC.Encoding = "base32" }),
			"hmac.template must contain {body}":   with(func(c *Config) { c.HMAC.Template = "{timestamp}.{id}" }),
			"unknown placeholder {ts}":            with(func(c *Config) { c.HMAC.Template = "{ts}.{body}" }),
			"hmac.timestamp_header is required":   with(func(c *Config) { c.HMAC.TimestampHeader = "" }),
			"hmac.timestamp_header is set":        with(func(c *Config) { c.HMAC.Template = "{id}.{body}" }),
			"hmac.id_header is required when":     with(func(c *Config) { c.HMAC.IDHeader, c.HMAC.IDPath = "", "id" }),
			"hmac.id_header or hmac.id_path":      with(func(c *Config) { c.HMAC.Template, c.HMAC.IDHeader = "{timestamp}.{body}", "" }),
			"hmac.id_header and hmac.id_path":     with(func(c *Config) { c.HMAC.IDPath = "id" }),
			"hmac.type_header and hmac.type_path": with(func(c *Config) { c.HMAC.TypeHeader = "X-Type" }),
			`hmac.id_path "data..id"`: with(func(c *Config) {
				c.HMAC.Template, c.HMAC.IDHeader, c.HMAC.IDPath = "{timestamp}.{body}", "", "data..id"
			}),
			`hmac.challenge_path ".challenge"`:     with(func(c *Config) { c.HMAC.ChallengePath = ".challenge" }),
			"hmac.api_keys is required":            with(func(c *Config) { c.HMAC.APIKeyHeader = "X-Api-Key" }),
			"hmac.api_key_header is required":      with(func(c *Config) { c.HMAC.APIKeys = []string{hmacTestAPIKey} }),
			"hmac.api_keys[1] is empty":            with(func(c *Config) { c.HMAC.APIKeyHeader, c.HMAC.APIKeys = "X-Api-Key", []string{"k", ""} }),
			"basic_auth[0] needs a username":       with(func(c *Config) { c.BasicAuth = []BasicAuth{{Username: "u"}} }),
			"secrets: at least one is required":    with(func(c *Config) { c.Secrets = nil }),
			"tolerance: must not be negative":      with(func(c *Config) { c.Tolerance = -time.Second }),
			"secrets[1]: must not be empty":        with(func(c *Config) { c.Secrets = []string{hmacTestSecret, ""} }),
			"hmac.template has an unknown placeho": with(func(c *Config) { c.HMAC.Template = "{Body}" }),
		} {
			v, err := newHMACVerifier(config)
			require.ErrorContains(t, err, contains)
			require.Nil(t, v)
			verifier, err := New("hmac", config)
			require.ErrorContains(t, err, contains)
			require.Nil(t, verifier)
		}
	})

	t.Run("DefaultsAreSHA256HexTheRawBodyAndFiveMinutes", func(t *testing.T) {
		t.Parallel()
		v := newTestHMAC(t, &Config{Secrets: []string{hmacTestSecret}, HMAC: &HMACConfig{Header: "X-Sig", IDHeader: "X-Id"}})
		require.Equal(t, sha256.Size, v.keys.size)
		require.False(t, v.base64)
		require.Nil(t, v.template)
		require.Equal(t, DefaultTolerance, v.tolerance)
		require.WithinDuration(t, time.Now(), v.now(), time.Minute)
	})

	t.Run("LiteralBracesAreNotPlaceholders", func(t *testing.T) {
		t.Parallel()
		config := hmacTestConfig(testNow, &HMACConfig{Header: "X-Sig", Template: "{ {body} }{}", IDPath: "id"}, hmacTestSecret)
		body := []byte(`{"id":"evt_1"}`)
		header := http.Header{"X-Sig": {hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestSecret, "{ "+string(body)+" }{}"))}}
		_, err := newTestHMAC(t, config).Verify(body, header)
		require.NoError(t, err)
	})
}

func TestHMAC(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","type":"order.created","data":{"id":"ord_1","n":42}}`)
	github := func(t *testing.T, secrets ...string) *hmacVerifier {
		return newTestHMAC(t, hmacTestConfig(testNow, githubHMACConfig(), secrets...))
	}
	githubHeader := func(secret string, body []byte) http.Header {
		return http.Header{
			"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(hmacReferenceMAC(sha256.New, secret, string(body)))},
			"X-Github-Delivery":   {"d1"}, "X-Github-Event": {"push"},
		}
	}

	t.Run("ValidDeliveryVerifies", func(t *testing.T) {
		t.Parallel()
		delivery, err := github(t, hmacTestSecret).Verify(body, githubHeader(hmacTestSecret, body))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "d1", Type: "push", Payload: body}, requireOneEvent(t, delivery))
	})

	t.Run("EitherSecretVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		v := github(t, hmacTestOldSecret, hmacTestSecret)
		for _, secret := range []string{hmacTestOldSecret, hmacTestSecret} {
			_, err := v.Verify(body, githubHeader(secret, body))
			require.NoError(t, err)
		}
		_, err := github(t, hmacTestOldSecret).Verify(body, githubHeader(hmacTestSecret, body))
		requireRejected(t, err, ErrSignatureInvalid, hmacTestOldSecret, hmacTestSecret)
	})

	t.Run("TamperedBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		v := github(t, hmacTestSecret)
		header := githubHeader(hmacTestSecret, body)
		for _, tampered := range [][]byte{
			[]byte(`{"id":"evt_2","type":"order.created","data":{"id":"ord_1","n":42}}`), append(append([]byte{}, body...), ' '),
			body[1:], nil,
		} {
			_, err := v.Verify(tampered, header)
			requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
		}
	})

	t.Run("EverySingleBitFlipOfTheSignatureBytesIsInvalid", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			algorithm, encoding string
			newHash             func() hash.Hash
		}{
			{"sha1", "hex", sha1.New}, {"sha256", "hex", sha256.New}, {"sha512", "hex", sha512.New},
			{"sha1", "base64", sha1.New}, {"", "base64", sha256.New}, {"sha512", "base64", sha512.New},
		} {
			config := hmacTestConfig(testNow, &HMACConfig{Header: "X-Sig", Encoding: tc.encoding, IDHeader: "X-Id"}, hmacTestSecret)
			config.Algorithm = tc.algorithm
			v := newTestHMAC(t, config)
			encode := hex.EncodeToString
			if tc.encoding == "base64" {
				encode = base64.StdEncoding.EncodeToString
			}
			mac := hmacReferenceMAC(tc.newHash, hmacTestSecret, string(body))
			_, err := v.Verify(body, http.Header{"X-Sig": {encode(mac)}})
			require.NoError(t, err, tc)
			for bit := range len(mac) * 8 {
				flipped := append([]byte{}, mac...)
				flipped[bit/8] ^= 1 << (bit % 8)
				_, err := v.Verify(body, http.Header{"X-Sig": {encode(flipped)}})
				requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
			}
			encoded := encode(mac)
			for bit := range len(encoded) * 8 {
				flipped := []byte(encoded)
				flipped[bit/8] ^= 1 << (bit % 8)
				_, err := v.Verify(body, http.Header{"X-Sig": {string(flipped)}})
				if tc.encoding == "hex" && string(flipped) == strings.ToUpper(encoded) {
					require.NoError(t, err, "hex written all in upper case is the same MAC")
					continue
				}
				requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
			}
		}
	})

	t.Run("MissingOrEmptySignatureIsMissing", func(t *testing.T) {
		t.Parallel()
		v := github(t, hmacTestSecret)
		for _, header := range []http.Header{{}, {"X-Hub-Signature-256": {""}}, {"X-Hub-Signature": {githubVectorSHA1}}} {
			_, err := v.Verify(body, header)
			requireRejected(t, err, ErrSignatureMissing, hmacTestSecret)
		}
	})

	t.Run("WrongPrefixIsInvalid", func(t *testing.T) {
		t.Parallel()
		v := github(t, hmacTestSecret)
		encoded := hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestSecret, string(body)))
		for _, value := range []string{encoded, "sha1=" + encoded, "SHA256=" + encoded, "sha256 =" + encoded, " sha256=" + encoded, "sha256=sha256=" + encoded} {
			_, err := v.Verify(body, http.Header{"X-Hub-Signature-256": {value}})
			requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
		}
	})

	t.Run("WrongAlgorithmIsInvalid", func(t *testing.T) {
		t.Parallel()
		v := github(t, hmacTestSecret)
		for _, newHash := range []func() hash.Hash{sha1.New, sha512.New, sha512.New512_256, sha256.New224} {
			value := "sha256=" + hex.EncodeToString(hmacReferenceMAC(newHash, hmacTestSecret, string(body)))
			_, err := v.Verify(body, http.Header{"X-Hub-Signature-256": {value}})
			requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
		}
	})

	t.Run("UpperCaseHexIsTheSameMACButMixedCaseIsInvalid", func(t *testing.T) {
		t.Parallel()
		encoded := strings.TrimPrefix(githubHeader(hmacTestSecret, body).Get("X-Hub-Signature-256"), "sha256=")
		_, err := github(t, hmacTestSecret).Verify(body, http.Header{"X-Hub-Signature-256": {"sha256=" + strings.ToUpper(encoded)}})
		require.NoError(t, err)
		first, last := strings.IndexAny(encoded, "abcdef"), strings.LastIndexAny(encoded, "abcdef")
		require.Less(t, first, last, "the MAC needs two hex letters")
		for _, i := range []int{first, last} { // one digit in upper case
			mixed := encoded[:i] + strings.ToUpper(encoded[i:i+1]) + encoded[i+1:]
			_, err := github(t, hmacTestSecret).Verify(body, http.Header{"X-Hub-Signature-256": {"sha256=" + mixed}})
			requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
		}
	})

	t.Run("NonCanonicalEncodingsAreInvalid", func(t *testing.T) {
		t.Parallel()
		config := hmacTestConfig(testNow, &HMACConfig{Header: "X-Sig", Encoding: "base64", IDHeader: "X-Id"}, shopifyVectorSecret)
		v := newTestHMAC(t, config)
		prefix := shopifyVectorSignature[:len(shopifyVectorSignature)-2]
		mac := twilioDecodeBase64(t, shopifyVectorSignature)
		for _, spelling := range []string{
			prefix + "h=", // unused low bits set
			shopifyVectorSignature[:20] + "\n" + shopifyVectorSignature[20:], shopifyVectorSignature + "\r\n",
			base64.RawStdEncoding.EncodeToString(mac), base64.URLEncoding.EncodeToString(append(mac, 0xfb)),
			hex.EncodeToString(mac), " " + shopifyVectorSignature,
		} {
			_, err := v.Verify([]byte(shopifyVectorBody), http.Header{"X-Sig": {spelling}})
			requireRejected(t, err, ErrSignatureInvalid, shopifyVectorSecret)
		}
		encoded := hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestSecret, string(body)))
		for _, spelling := range []string{encoded[2:], encoded + "00", encoded[:63] + "g", encoded + "\n", "0x" + encoded[2:]} {
			_, err := github(t, hmacTestSecret).Verify(body, http.Header{"X-Hub-Signature-256": {"sha256=" + spelling}})
			requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
		}
	})

	t.Run("UnsignedIDHeaderIsTakenAsSent", func(t *testing.T) {
		t.Parallel()
		header := githubHeader(hmacTestSecret, body)
		header.Set("X-GitHub-Delivery", "d2")
		delivery, err := github(t, hmacTestSecret).Verify(body, header)
		require.NoError(t, err)
		require.Equal(t, "d2", requireOneEvent(t, delivery).ID)
	})

	t.Run("UnstorableIDHeaderIsNoID", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"d\xff", strings.Repeat("d", 1025), "d\x00"} {
			header := githubHeader(hmacTestSecret, body)
			header.Set("X-GitHub-Delivery", id)
			delivery, err := github(t, hmacTestSecret).Verify(body, header)
			require.NoError(t, err)
			event := requireOneEvent(t, delivery)
			require.ErrorContains(t, event.ParseError, "header X-GitHub-Delivery is not valid UTF-8, has a NUL or is longer than 1024 bytes")
			require.Empty(t, event.ID)
		}
	})
}

func TestHMACTemplate(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","type":"order.created"}`)
	v := newTestHMAC(t, hmacTestConfig(testNow, templatedHMACConfig(), hmacTestSecret))

	t.Run("TemplatedDeliveryVerifies", func(t *testing.T) {
		t.Parallel()
		delivery, err := v.Verify(body, templatedHeader(hmacTestSecret, testNow, "evt_1", body))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "evt_1", Type: "order.created", Payload: body}, requireOneEvent(t, delivery))
		require.Equal(t, []string{"X-Event-Id", "X-Signature", "X-Timestamp"}, hmacSortedKeys(delivery.Headers))
	})

	t.Run("TimestampsAtTheEdgesOfToleranceVerify", func(t *testing.T) {
		t.Parallel()
		for _, at := range []time.Time{testNow.Add(-DefaultTolerance), testNow.Add(DefaultTolerance)} {
			_, err := v.Verify(body, templatedHeader(hmacTestSecret, at, "evt_1", body))
			require.NoError(t, err)
		}
	})

	t.Run("StaleOrFutureTimestampIsOutsideTolerance", func(t *testing.T) {
		t.Parallel()
		for _, at := range []time.Time{
			testNow.Add(-DefaultTolerance - time.Second), testNow.Add(DefaultTolerance + time.Second),
			testNow.Add(-30 * 24 * time.Hour), testNow.Add(365 * 24 * time.Hour), time.Unix(0, 0),
		} {
			_, err := v.Verify(body, templatedHeader(hmacTestSecret, at, "evt_1", body))
			requireRejected(t, err, ErrTimestampOutsideTolerance, hmacTestSecret)
		}
	})

	t.Run("ConfiguredToleranceApplies", func(t *testing.T) {
		t.Parallel()
		config := hmacTestConfig(testNow, templatedHMACConfig(), hmacTestSecret)
		config.Tolerance = 10 * time.Second
		short := newTestHMAC(t, config)
		_, err := short.Verify(body, templatedHeader(hmacTestSecret, testNow.Add(-10*time.Second), "evt_1", body))
		require.NoError(t, err)
		_, err = short.Verify(body, templatedHeader(hmacTestSecret, testNow.Add(11*time.Second), "evt_1", body))
		requireRejected(t, err, ErrTimestampOutsideTolerance, hmacTestSecret)
	})

	t.Run("ForgedTimestampIsInvalidNotStale", func(t *testing.T) {
		t.Parallel()
		header := templatedHeader(hmacTestSecret, testNow.Add(-time.Hour), "evt_1", body)
		header.Set("X-Timestamp", strconv.FormatInt(testNow.Unix(), 10))
		_, err := v.Verify(body, header)
		requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
	})

	t.Run("NonCanonicalTimestampIsInvalid", func(t *testing.T) {
		t.Parallel()
		for _, timestamp := range []string{"0" + strconv.FormatInt(testNow.Unix(), 10), "+1700000000", "1700000000.0", "1700000000000", "1e9", " 1700000000"} {
			header := templatedHeader(hmacTestSecret, testNow, "evt_1", body)
			header.Set("X-Timestamp", timestamp)
			mac := hmacReferenceMAC(sha256.New, hmacTestSecret, timestamp+".evt_1."+string(body))
			header.Set(hmacTestTemplateHeader, "v1="+hex.EncodeToString(mac))
			_, err := v.Verify(body, header)
			requireNotAuthentic(t, err)
		}
	})

	t.Run("MissingTimestampOrSignedIDIsMissing", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"X-Timestamp", "X-Event-Id", hmacTestTemplateHeader} {
			header := templatedHeader(hmacTestSecret, testNow, "evt_1", body)
			header.Del(name)
			_, err := v.Verify(body, header)
			requireRejected(t, err, ErrSignatureMissing, hmacTestSecret)
		}
	})

	t.Run("SignedIDCannotBeChanged", func(t *testing.T) {
		t.Parallel()
		header := templatedHeader(hmacTestSecret, testNow, "evt_1", body)
		header.Set("X-Event-Id", "evt_2")
		_, err := v.Verify(body, header)
		requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
	})

	t.Run("SignHMACOutputVerifies", func(t *testing.T) {
		t.Parallel()
		header, err := SignHMAC(hmacTestConfig(testNow, templatedHMACConfig()), hmacTestSecret, testNow, "evt_1", body)
		require.NoError(t, err)
		require.Equal(t, templatedHeader(hmacTestSecret, testNow, "evt_1", body), header)
		_, err = SignHMAC(hmacTestConfig(testNow, templatedHMACConfig()), hmacTestSecret, testNow, "", body)
		require.ErrorContains(t, err, "{id}")
		_, err = SignHMAC(nil, hmacTestSecret, testNow, "evt_1", body)
		require.Error(t, err)
	})
}

func TestHMACCredentials(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1"}`)
	hc := &HMACConfig{Header: "X-Sig", IDPath: "id", APIKeyHeader: "X-Api-Key", APIKeys: []string{"older-key-000", hmacTestAPIKey}}
	config := hmacTestConfig(testNow, hc, hmacTestSecret)
	config.BasicAuth = []BasicAuth{{Username: "hooks", Password: "old-password"}, {Username: "hooks", Password: hmacTestPassword}}
	v := newTestHMAC(t, config)
	secrets := []string{hmacTestSecret, hmacTestPassword, hmacTestAPIKey, "old-password", "older-key-000"}
	valid := func() http.Header {
		header := http.Header{}
		header.Set("X-Sig", hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestSecret, string(body))))
		header.Set("X-Api-Key", hmacTestAPIKey)
		header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("hooks:"+hmacTestPassword)))
		return header
	}

	t.Run("AllChecksPassingVerifiesAndKeepsNoCredential", func(t *testing.T) {
		t.Parallel()
		delivery, err := v.Verify(body, valid())
		require.NoError(t, err)
		require.Equal(t, Event{ID: "evt_1", Payload: body}, requireOneEvent(t, delivery))
		require.Equal(t, []string{"X-Sig"}, hmacSortedKeys(delivery.Headers))
	})

	t.Run("EachMissingOrWrongCredentialIsNotAuthentic", func(t *testing.T) {
		t.Parallel()
		for name, edit := range map[string]func(http.Header){
			"NoAPIKey":     func(h http.Header) { h.Del("X-Api-Key") },
			"WrongAPIKey":  func(h http.Header) { h.Set("X-Api-Key", hmacTestAPIKey+"x") },
			"APIKeyPrefix": func(h http.Header) { h.Set("X-Api-Key", hmacTestAPIKey[:5]) },
			"NoBasicAuth":  func(h http.Header) { h.Del("Authorization") },
			"WrongPassword": func(h http.Header) {
				h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("hooks:nope")))
			},
			"WrongUser":      func(h http.Header) { (&http.Request{Header: h}).SetBasicAuth("other", hmacTestPassword) },
			"BearerNotBasic": func(h http.Header) { h.Set("Authorization", "Bearer "+hmacTestPassword) },
			"NoSignature":    func(h http.Header) { h.Del("X-Sig") },
			"WrongSignature": func(h http.Header) {
				h.Set("X-Sig", hex.EncodeToString(hmacReferenceMAC(sha256.New, "other", string(body))))
			},
			"APIKeyAsWrongH":  func(h http.Header) { h.Set("X-Api-Token", h.Get("X-Api-Key")); h.Del("X-Api-Key") },
			"PasswordAsAPIKe": func(h http.Header) { h.Set("X-Api-Key", hmacTestPassword) },
		} {
			header := valid()
			edit(header)
			_, err := v.Verify(body, header)
			requireNotAuthentic(t, err)
			for _, secret := range secrets {
				require.NotContains(t, err.Error(), secret, name)
			}
		}
	})

	t.Run("OlderCredentialsVerifyDuringRotation", func(t *testing.T) {
		t.Parallel()
		header := valid()
		header.Set("X-Api-Key", "older-key-000")
		(&http.Request{Header: header}).SetBasicAuth("hooks", "old-password")
		_, err := v.Verify(body, header)
		require.NoError(t, err)
	})

	t.Run("SignHeadersSendsTheFirstCredentialsAndTheType", func(t *testing.T) {
		t.Parallel()
		config := hmacTestConfig(testNow, &HMACConfig{
			Header: "X-Sig", IDHeader: "X-Id", TypeHeader: "X-Type", APIKeyHeader: "X-Api-Key", APIKeys: []string{hmacTestAPIKey},
		}, hmacTestSecret)
		config.BasicAuth = []BasicAuth{{Username: "hooks", Password: hmacTestPassword}}
		header, err := SignHeaders(&SignParams{Provider: "hmac", Secret: hmacTestSecret, EventID: "evt_1", EventType: "order.created", Body: body, Config: config})
		require.NoError(t, err)
		require.Equal(t, hmacTestAPIKey, header.Get("X-Api-Key"))
		delivery, err := newTestHMAC(t, config).Verify(body, header)
		require.NoError(t, err)
		require.Equal(t, Event{ID: "evt_1", Type: "order.created", Payload: body}, requireOneEvent(t, delivery))

		_, err = SignHeaders(&SignParams{Provider: "hmac", Secret: hmacTestSecret, Body: body})
		require.Error(t, err)
		_, err = SignHeaders(&SignParams{Provider: "hmac", Secret: hmacTestSecret, Body: body, Config: &Config{}})
		require.ErrorContains(t, err, "hmac.header")
	})
}

func TestHMACPayload(t *testing.T) {
	t.Parallel()
	pathConfig := func(challengePath string) *hmacVerifier {
		return newTestHMAC(t, hmacTestConfig(testNow, &HMACConfig{
			Header: "X-Sig", IDPath: "data.id", TypePath: "type", ChallengePath: challengePath,
		}, hmacTestSecret))
	}
	sign := func(body string) http.Header {
		return http.Header{"X-Sig": {hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestSecret, body))}}
	}

	t.Run("IDAndTypeComeFromJSONPathsStringOrNumber", func(t *testing.T) {
		t.Parallel()
		v := pathConfig("")
		for body, want := range map[string]Event{
			`{"type":"a.b","data":{"id":"ord_1"}}`:     {ID: "ord_1", Type: "a.b"},
			`{"type":"a.b","data":{"id":12345678901}}`: {ID: "12345678901", Type: "a.b"},
			`{"type":7,"data":{"id":-1.5e3}}`:          {ID: "-1.5e3", Type: "7"},
			`{"type":{"x":1},"data":{"id":"x","y":1}}`: {ID: "x"},
		} {
			delivery, err := v.Verify([]byte(body), sign(body))
			require.NoError(t, err, body)
			want.Payload = []byte(body)
			require.Equal(t, want, requireOneEvent(t, delivery), body)
		}
	})

	t.Run("MissingIDIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		v := pathConfig("")
		for _, body := range []string{`{"type":"a.b"}`, `{"type":"a.b","data":{"id":null}}`, `{"type":"a.b","data":{"id":true}}`,
			`{"type":"a.b","data":"id"}`, `{"type":"a.b","data":[{"id":"x"}]}`, `{"type":"a.b","data":{"id":""}}`} {
			delivery, err := v.Verify([]byte(body), sign(body))
			require.NoError(t, err, body)
			event := requireOneEvent(t, delivery)
			require.ErrorContains(t, event.ParseError, `no event id: the body's "data.id" is missing or empty`, body)
			require.Equal(t, Event{Type: "a.b", ParseError: event.ParseError}, event)
		}
	})

	t.Run("UnstorableBodiesAreAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		v := newTestHMAC(t, hmacTestConfig(testNow, githubHMACConfig(), hmacTestSecret))
		for body, contains := range map[string]string{
			"":                                   "body is empty",
			"{\"id\":\"caf\xe9\"}":               "not valid UTF-8",
			`{"id":"evt_1","note":"a\u0000b"}`:   `\u0000`,
			`{"id":"evt_1","note":"\ud800"}`:     "surrogate",
			`[{"id":"evt_1"}]`:                   "array, not an object",
			"payload=%7B%22id%22%3A%22evt%22%7D": "not JSON",
		} {
			header := http.Header{
				"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestSecret, body))},
				"X-Github-Delivery":   {"d1"},
			}
			delivery, err := v.Verify([]byte(body), header)
			require.NoError(t, err, "an authentic delivery is not an error: %q", body)
			event := requireOneEvent(t, delivery)
			require.ErrorContains(t, event.ParseError, contains, "%q", body)
			require.Equal(t, Event{ID: "d1", ParseError: event.ParseError}, event)
		}
	})

	t.Run("ChallengeIsEchoedAndNotStored", func(t *testing.T) {
		t.Parallel()
		for path, body := range map[string]string{
			"challenge":           `{"type":"url_verification","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`,
			"data.validation.key": `{"data":{"validation":{"key":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}}}`,
		} {
			delivery, err := pathConfig(path).Verify([]byte(body), sign(body))
			require.NoError(t, err)
			require.Empty(t, delivery.Events)
			require.Equal(t, &Reply{Status: http.StatusOK, ContentType: "text/plain",
				Body: []byte("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")}, delivery.Reply)
		}
	})

	t.Run("UnverifiedChallengeIsNotEchoed", func(t *testing.T) {
		t.Parallel()
		body := `{"challenge":"abc"}`
		_, err := pathConfig("challenge").Verify([]byte(body), sign(`{"challenge":"abd"}`))
		requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
		_, err = pathConfig("challenge").Verify([]byte(body), http.Header{})
		requireRejected(t, err, ErrSignatureMissing, hmacTestSecret)
	})

	t.Run("WithoutAStringChallengeItIsAnEvent", func(t *testing.T) {
		t.Parallel()
		v := pathConfig("challenge")
		for _, body := range []string{
			`{"type":"a.b","data":{"id":"x"},"challenge":""}`, `{"type":"a.b","data":{"id":"x"},"challenge":42}`,
			`{"type":"a.b","data":{"id":"x"}}`, `{"type":"a.b","data":{"id":"x"},"challenge":"\u0000"}`,
		} {
			delivery, err := v.Verify([]byte(body), sign(body))
			require.NoError(t, err, body)
			require.Nil(t, delivery.Reply, body)
			require.Len(t, delivery.Events, 1)
		}
	})

	t.Run("HugeBodyVerifiesWithoutPanicking", func(t *testing.T) {
		t.Parallel()
		body := `{"type":"a.b","data":{"id":"big"},"pad":"` + strings.Repeat("z", hugeBodyBytes) + `"}`
		delivery, err := pathConfig("challenge").Verify([]byte(body), sign(body))
		require.NoError(t, err)
		require.Equal(t, "big", requireOneEvent(t, delivery).ID)
		_, err = pathConfig("").Verify([]byte(body+" "), sign(body))
		requireRejected(t, err, ErrSignatureInvalid, hmacTestSecret)
	})
}

// hmacSortedKeys returns a map's keys in order.
func hmacSortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// FuzzHMACVerify checks that Verify never panics, that every refusal wraps a
// sentinel without quoting a secret, and that whatever verifies carries the
// genuine signature and yields either a handshake or one storable event.
func FuzzHMACVerify(f *testing.F) {
	body := []byte(`{"id":"evt_1","type":"order.created"}`)
	seed := func(b []byte, at time.Time, id string) {
		h := templatedHeader(hmacTestSecret, at, id, b)
		f.Add(b, h.Get(hmacTestTemplateHeader), h.Get("X-Timestamp"), id)
	}
	seed(body, testNow, "evt_1")
	seed(body, testNow.Add(time.Hour), "evt_1")
	seed([]byte(`{"challenge":"c","type":"x"}`), testNow, "h")
	seed([]byte(`{"type":"\u0000"}`), testNow, "e")
	seed(nil, testNow, "\xff")
	f.Add(body, "v1=zz", "01", "")
	config := hmacTestConfig(testNow, templatedHMACConfig(), hmacTestOldSecret, hmacTestSecret)
	config.HMAC.ChallengePath = "challenge"
	v := newTestHMAC(f, config)

	f.Fuzz(func(t *testing.T, body []byte, signature, timestamp, id string) {
		header := http.Header{hmacTestTemplateHeader: {signature}, "X-Timestamp": {timestamp}, "X-Event-Id": {id}}
		delivery, err := v.Verify(body, header)
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), hmacTestSecret)
			require.NotContains(t, err.Error(), hmacTestOldSecret)
			return
		}
		signed := timestamp + "." + id + "." + string(body)
		require.Contains(t, []string{
			"v1=" + hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestSecret, signed)),
			"v1=" + hex.EncodeToString(hmacReferenceMAC(sha256.New, hmacTestOldSecret, signed)),
		}, "v1="+strings.ToLower(strings.TrimPrefix(signature, "v1=")))
		if delivery.Reply != nil {
			require.Empty(t, delivery.Events)
			return
		}
		event := requireOneEvent(t, delivery)
		requireStorableKey(t, event.ID)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
		}
	})
}

// The generic provider configured like GitHub, checked with GitHub's
// documented test vector.
func ExampleNew_hmac() {
	verifier, err := New("hmac", &Config{
		Secrets: []string{"It's a Secret to Everybody"},
		HMAC: &HMACConfig{
			Header: "X-Hub-Signature-256", Prefix: "sha256=", IDHeader: "X-GitHub-Delivery", TypeHeader: "X-GitHub-Event",
		},
	})
	if err != nil {
		panic(err)
	}
	header := http.Header{}
	header.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	header.Set("X-GitHub-Event", "ping")
	delivery, err := verifier.Verify([]byte("Hello, World!"), header)
	if err != nil {
		panic(err)
	}
	event := delivery.Events[0]
	fmt.Println(event.ID, event.Type, event.ParseError)
	// Output:
	// 72d3162e-cc78-11e3-81ab-4c9367dc0958 ping body is not JSON: invalid character 'H' looking for beginning of value
}
