package sign_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// pkg/provider's tests check every signer here against the providers'
// official vectors and the verifiers; these are the vectors that need no
// verifier, so that this package tests itself.
func TestSignersReproduceOfficialVectors(t *testing.T) {
	t.Parallel()
	// docs.github.com, "Validating webhook deliveries".
	require.Equal(t, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		sign.GitHub("It's a Secret to Everybody", []byte("Hello, World!")))
	// Shopify's documented example.
	require.Equal(t, "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=", sign.Shopify("test_secret_key", []byte(`{"foo": "bar"}`)))
	// Twilio's JSON scheme: the URL with bodySHA256 in its query.
	const body = `{"property": "value", "boolean": true}`
	require.Equal(t, "a9nBmqA0ju/hNViExpshrM61xv4=", sign.TwilioJSON("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", []byte(body)))
	require.Equal(t, "y77kIzt2vzLz71DgmJGsen2scGs=", sign.TwilioJSON("12345", "https://mycompany.com/myapp.php", []byte(body)))
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	t.Run("EmptyIsTheRawBody", func(t *testing.T) {
		t.Parallel()
		template, err := sign.ParseTemplate("")
		require.NoError(t, err)
		require.Nil(t, template)
		require.Equal(t, [][]byte{[]byte("b")}, template.Signed([]byte("b"), "1", "i"))
	})
	t.Run("PlaceholdersAreFilledLiteralsKept", func(t *testing.T) {
		t.Parallel()
		template, err := sign.ParseTemplate("v0:{timestamp}:{id}:{body}")
		require.NoError(t, err)
		require.True(t, template.Uses("id"))
		require.Equal(t, "v0:1:i:{body}", string(joined(template.Signed([]byte("{body}"), "1", "i"))))
	})
	t.Run("BodyIsRequiredAndUnknownPlaceholdersRefused", func(t *testing.T) {
		t.Parallel()
		_, err := sign.ParseTemplate("{timestamp}")
		require.ErrorContains(t, err, "must contain {body}")
		_, err = sign.ParseTemplate("{Body}")
		require.ErrorContains(t, err, "unknown placeholder {Body}")
	})
}

func joined(parts [][]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
