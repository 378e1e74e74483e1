package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"hash"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// testNow is the pinned clock of tests that do not use a vector's own time.
var testNow = time.Unix(1_700_000_000, 0)

// pinnedConfig returns a Config with secrets, the default tolerance and a
// clock pinned at now.
func pinnedConfig(now time.Time, secrets ...string) *Config {
	return &Config{Secrets: secrets, Now: func() time.Time { return now }}
}

// referenceMAC is the tests' own HMAC, independent of the package's.
func referenceMAC(newHash func() hash.Hash, key, message []byte) []byte {
	mac := hmac.New(newHash, key)
	mac.Write(message)
	return mac.Sum(nil)
}

// referenceHMAC is referenceMAC with SHA-256, the common case.
func referenceHMAC(key, message []byte) []byte { return referenceMAC(sha256.New, key, message) }

// requireRejected requires err to wrap sentinel and to quote none of secrets.
func requireRejected(t *testing.T, err, sentinel error, secrets ...string) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	for _, secret := range secrets {
		require.NotContains(t, err.Error(), secret)
	}
}

// requireNotAuthentic requires err to wrap one of the three sentinels.
func requireNotAuthentic(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrSignatureMissing) || errors.Is(err, ErrSignatureInvalid) ||
		errors.Is(err, ErrTimestampOutsideTolerance), "error wraps no sentinel: %v", err)
}

// requireStorableKey requires s to be text PostgreSQL stores and indexes as
// an event id or type, checked independently of storableKey.
func requireStorableKey(t *testing.T, s string) {
	t.Helper()
	require.True(t, utf8.ValidString(s) && !strings.ContainsRune(s, 0), "%q", s)
	require.LessOrEqual(t, len(s), maxKeyBytes)
}

// requireStorablePayload requires payload to be what jsonb stores as an
// object, checked independently of parsePayload: valid UTF-8, a JSON
// object, and no NUL.
func requireStorablePayload(t *testing.T, payload []byte) {
	t.Helper()
	require.True(t, utf8.Valid(payload))
	var decoded any
	require.NoError(t, json.Unmarshal(payload, &decoded))
	require.IsType(t, map[string]any{}, decoded)
	require.False(t, containsNUL(decoded))
}

// requireOneEvent requires delivery to hold exactly one event and returns it.
func requireOneEvent(t *testing.T, delivery *Delivery) Event {
	t.Helper()
	require.NotNil(t, delivery)
	require.Len(t, delivery.Events, 1)
	return delivery.Events[0]
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("RegistersEveryProvider", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, []string{
			"adyen", "github", "hmac", "marqeta", "paddle", "shopify", "slack", "square",
			"standardwebhooks", "stripe", "svix", "twilio",
		}, Names())
	})

	t.Run("UnknownProviderIsAnError", func(t *testing.T) {
		t.Parallel()
		_, err := New("paypal", pinnedConfig(testNow, "secret"))
		require.ErrorContains(t, err, `unknown provider "paypal"`)
	})

	t.Run("InvalidConfigIsAnErrorForEveryProvider", func(t *testing.T) {
		t.Parallel()
		for _, name := range Names() {
			for _, config := range []*Config{
				nil,
				{},
				{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ""}},
				{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Tolerance: -time.Second},
				// Empty Basic Auth credentials would let in an empty Authorization.
				{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, BasicAuth: []BasicAuth{{Username: "u"}}},
				{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, BasicAuth: []BasicAuth{{Password: "p"}}},
			} {
				verifier, err := New(name, config)
				require.Error(t, err, name)
				require.Nil(t, verifier, name)
			}
		}
	})

	t.Run("ConstructorsRefuseANilConfigWithoutPanicking", func(t *testing.T) {
		t.Parallel()
		for _, name := range Names() {
			verifier, err := constructors[name](nil)
			require.ErrorContains(t, err, "config is required", name)
			require.Nil(t, verifier, name)
		}
	})

	t.Run("ConstructorErrorGivesANilVerifier", func(t *testing.T) {
		t.Parallel()
		verifier, err := New("standardwebhooks", pinnedConfig(testNow, "whsec_%%%"))
		require.Error(t, err)
		require.Nil(t, verifier) // an untyped nil, not a nil *standardWebhooksVerifier
	})

	t.Run("DefaultsToFiveMinutesAndTheWallClock", func(t *testing.T) {
		t.Parallel()
		stripe, err := newStripeVerifier(&Config{Secrets: []string{"whsec_test_secret"}})
		require.NoError(t, err)
		require.Equal(t, DefaultTolerance, stripe.tolerance)
		require.WithinDuration(t, time.Now(), stripe.now(), time.Minute)
	})
}

func TestParseUnix(t *testing.T) {
	t.Parallel()

	t.Run("CanonicalSecondsParse", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"0", "7", "1492774577", "9223372036854775807"} {
			_, err := parseUnix(s)
			require.NoError(t, err, s)
		}
	})

	t.Run("NonCanonicalFormsAreInvalid", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"", "+1", "-1", "01", " 1", "1 ", "1.0", "1e3", "0x10", "9223372036854775808", "１"} {
			_, err := parseUnix(s)
			require.ErrorIs(t, err, ErrSignatureInvalid, "%q", s)
		}
	})
}

func TestCheckTimestamp(t *testing.T) {
	t.Parallel()

	t.Run("EdgesOfToleranceAreInside", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, checkTimestamp(testNow, testNow.Add(-time.Minute), time.Minute))
		require.NoError(t, checkTimestamp(testNow, testNow.Add(time.Minute), time.Minute))
	})

	t.Run("BeyondToleranceEitherWayIsOutside", func(t *testing.T) {
		t.Parallel()
		for _, signedAt := range []time.Time{
			testNow.Add(-time.Minute - time.Second), testNow.Add(time.Minute + time.Second),
			time.Unix(0, 0), time.Unix(1<<62, 0),
		} {
			require.ErrorIs(t, checkTimestamp(testNow, signedAt, time.Minute), ErrTimestampOutsideTolerance)
		}
	})
}
