package provider

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Vector from /work/shared/providers.md §3: github/docs
// content/webhooks/using-webhooks/validating-webhook-deliveries.md,
// "Testing the webhook payload validation".
const (
	githubVectorSecret    = "It's a Secret to Everybody"
	githubVectorBody      = "Hello, World!"
	githubVectorSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	// githubVectorSHA1 is the legacy X-Hub-Signature of the same pair
	// (derived, not in the docs): never accepted.
	githubVectorSHA1 = "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59"
)

func init() {
	registerConformance(githubSigner)
}

func githubSigner() signer {
	get, set := headerSignature("X-Hub-Signature-256", "sha256=")
	return signer{
		provider:      "github",
		secrets:       [2]string{"old github secret", "new github secret"},
		unknownSecret: "unknown github secret",
		body: func(ids ...string) []byte {
			return []byte(`{"zen":"Keep it logically awesome.","hook_id":1,"delivery":"` + ids[0] + `","hook":{"type":"Repository"}}`)
		},
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			header := githubHeader("sha256="+hex.EncodeToString(referenceHMAC([]byte(secret), body)), id, "ping")
			return request{header: header, body: body}
		},
		want:            wantOne("ping"),
		signature:       get,
		setSignature:    set,
		decode:          hex.DecodeString,
		encode:          hex.EncodeToString,
		signatureHeader: "X-Hub-Signature-256",
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, "X-Hub-Signature-256", "sha256=",
				"sha1=", "sha512=", "SHA256=", "sha256:", "sha256 =", "sha256", "", "v1=", "sha256==")
		},
	}
}

// githubHeader returns a GitHub delivery's headers ("" omits a header).
func githubHeader(signature, delivery, event string) http.Header {
	header := http.Header{}
	for name, value := range map[string]string{
		"X-Hub-Signature-256":                    signature,
		"X-GitHub-Delivery":                      delivery,
		"X-GitHub-Event":                         event,
		"X-GitHub-Hook-ID":                       "292430182",
		"X-GitHub-Hook-Installation-Target-Type": "repository",
		"X-GitHub-Hook-Installation-Target-ID":   "79929171",
		"User-Agent":                             "GitHub-Hookshot/044aadd",
	} {
		if value != "" {
			header.Set(name, value)
		}
	}
	return header
}

func newTestGitHub(t testing.TB, secrets ...string) *githubVerifier {
	t.Helper()
	github, err := newGitHubVerifier(pinnedConfig(testNow, secrets...))
	require.NoError(t, err)
	return github
}

func TestGitHub(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorVerifies", func(t *testing.T) {
		t.Parallel()
		header := githubHeader(githubVectorSignature, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues")
		delivery, err := newTestGitHub(t, githubVectorSecret).Verify([]byte(githubVectorBody), header)
		require.NoError(t, err)
		event := requireOneEvent(t, delivery) // authentic, but the docs' payload is not JSON
		require.ErrorContains(t, event.ParseError, "body is not JSON")
		require.Equal(t, Event{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "issues", ParseError: event.ParseError}, event)
		require.Equal(t, map[string]string{
			"X-Hub-Signature-256":                    githubVectorSignature,
			"X-Github-Delivery":                      "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			"X-Github-Event":                         "issues",
			"X-Github-Hook-Id":                       "292430182",
			"X-Github-Hook-Installation-Target-Type": "repository",
			"X-Github-Hook-Installation-Target-Id":   "79929171",
		}, delivery.Headers)
	})

	t.Run("SignGitHubReproducesTheOfficialVector", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, githubVectorSignature, sign.GitHub(githubVectorSecret, []byte(githubVectorBody)))
		require.Equal(t, strings.TrimPrefix(githubVectorSignature, "sha256="),
			hex.EncodeToString(referenceHMAC([]byte(githubVectorSecret), []byte(githubVectorBody))))
	})

	t.Run("PingIsAnEventLikeAnyOther", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"zen":"Design for failure.","hook_id":292430182,"hook":{"type":"Repository","events":["push"]}}`)
		delivery, err := newTestGitHub(t, githubVectorSecret).Verify(body,
			githubHeader(sign.GitHub(githubVectorSecret, body), "d1c5d6d0-0001", "ping"))
		require.NoError(t, err)
		require.Nil(t, delivery.Reply)
		require.Equal(t, Event{ID: "d1c5d6d0-0001", Type: "ping", Payload: body}, requireOneEvent(t, delivery))
	})

	t.Run("LegacySHA1SignatureIsNotAccepted", func(t *testing.T) {
		t.Parallel()
		github := newTestGitHub(t, githubVectorSecret)
		header := githubHeader("", "1", "issues")
		header.Set("X-Hub-Signature", githubVectorSHA1)
		_, err := github.Verify([]byte(githubVectorBody), header)
		requireRejected(t, err, ErrSignatureMissing, githubVectorSecret)
		_, err = github.Verify([]byte(githubVectorBody), githubHeader(githubVectorSHA1, "1", "issues"))
		requireRejected(t, err, ErrSignatureInvalid, githubVectorSecret)
	})

	t.Run("OtherSpellingsOfTheGenuineMACAreInvalid", func(t *testing.T) {
		t.Parallel()
		github := newTestGitHub(t, githubVectorSecret)
		encoded := strings.TrimPrefix(githubVectorSignature, "sha256=")
		for _, spelling := range []string{
			"sha256=" + strings.ToUpper(encoded),
			"sha256=" + encoded + " ",
			" sha256=" + encoded,
			"sha256=" + encoded + "00",
			"sha256=" + encoded[:63],
			githubVectorSignature + "," + githubVectorSignature,
		} {
			_, err := github.Verify([]byte(githubVectorBody), githubHeader(spelling, "1", "issues"))
			requireRejected(t, err, ErrSignatureInvalid, githubVectorSecret)
		}
	})

	t.Run("MissingDeliveryIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"action":"opened"}`)
		delivery, err := newTestGitHub(t, githubVectorSecret).Verify(body,
			githubHeader(sign.GitHub(githubVectorSecret, body), "", "issues"))
		require.NoError(t, err)
		event := requireOneEvent(t, delivery)
		require.ErrorContains(t, event.ParseError, "header X-GitHub-Delivery is missing or empty")
		require.Equal(t, "issues", event.Type)
	})

	t.Run("PresetAllowsGitHubsLargestPayloads", func(t *testing.T) {
		t.Parallel()
		preset, ok := PresetFor("github")
		require.True(t, ok)
		require.Equal(t, Preset{MaxBodyBytes: 25 << 20}, preset)
	})

	t.Run("ConfigWithoutSecretsIsAnError", func(t *testing.T) {
		t.Parallel()
		_, err := newGitHubVerifier(&Config{})
		require.ErrorContains(t, err, "github: ")
		require.ErrorContains(t, err, "secret")
	})
}

// FuzzGitHubVerify checks that Verify never panics, that every refusal
// wraps a sentinel without quoting the secret, and that whatever verifies
// carries exactly the genuine signature.
func FuzzGitHubVerify(f *testing.F) {
	f.Add([]byte(githubVectorBody), githubVectorSignature, "72d3162e")
	f.Add([]byte(`{"zen":"x"}`), sign.GitHub(githubVectorSecret, []byte(`{"zen":"x"}`)), "1")
	f.Add([]byte(githubVectorBody), strings.ToUpper(githubVectorSignature), "1")
	f.Add([]byte(githubVectorBody), githubVectorSHA1, "")
	f.Add([]byte{}, sign.GitHub(githubVectorSecret, nil), "")
	f.Add([]byte(`{"a":"\u0000"}`), "sha256=", "1")
	github := newTestGitHub(f, githubVectorSecret)

	f.Fuzz(func(t *testing.T, body []byte, signature, delivery string) {
		d, err := github.Verify(body, githubHeader(signature, delivery, "push"))
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), githubVectorSecret)
			return
		}
		require.Equal(t, "sha256="+hex.EncodeToString(referenceHMAC([]byte(githubVectorSecret), body)), signature)
		event := requireOneEvent(t, d)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
			require.Equal(t, delivery, event.ID)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}
