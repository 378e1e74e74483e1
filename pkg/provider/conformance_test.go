package provider

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// conformanceBody is a well-formed delivery of event evt_1.
var conformanceBody = []byte(`{"id":"evt_1","type":"order.created","data":{"object":{"id":"ord_1"}}}`)

// conformanceBundle is what each conformance case gets: a verifier
// configured with a signer's old and new secrets and the pinned clock.
type conformanceBundle struct {
	signer   signer
	verifier Verifier
	secrets  []string // every secret a message must not quote
}

func setupConformance(t *testing.T, s signer) *conformanceBundle {
	t.Helper()
	verifier, err := New(s.provider, pinnedConfig(testNow, s.secrets[:]...))
	require.NoError(t, err)
	return &conformanceBundle{signer: s, verifier: verifier, secrets: append(s.secrets[:], s.unknownSecret)}
}

// TestConformance runs every case for every provider.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("EveryRegisteredProviderHasASigner", func(t *testing.T) {
		t.Parallel()
		var names []string
		for _, s := range conformanceSigners() {
			names = append(names, s.provider)
		}
		require.ElementsMatch(t, Names(), names)
	})
	for _, s := range conformanceSigners() {
		t.Run(s.provider, func(t *testing.T) {
			t.Parallel()
			testConformance(t, s)
		})
	}
}

func testConformance(t *testing.T, s signer) {
	t.Run("ValidDeliveryVerifies", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		header := s.sign(t, s.secrets[1], testNow, "evt_1", conformanceBody)
		header.Set("Content-Type", "text/plain; charset=latin1") // never consulted
		delivery, err := bundle.verifier.Verify(conformanceBody, header)
		require.NoError(t, err)
		event := requireOneEvent(t, delivery)
		require.Equal(t, Event{ID: "evt_1", Type: "order.created", Payload: conformanceBody}, event)
		require.Equal(t, header.Get(s.signatureHeader), delivery.Headers[http.CanonicalHeaderKey(s.signatureHeader)])
		require.NotContains(t, delivery.Headers, "Content-Type")
	})

	t.Run("SignHeadersOutputVerifies", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		header, err := SignHeaders(&SignParams{
			Provider: s.provider, Secret: s.secrets[0], EventID: "evt_1", EventType: "order.created",
			Time: testNow, Body: conformanceBody,
		})
		require.NoError(t, err)
		delivery, err := bundle.verifier.Verify(conformanceBody, header)
		require.NoError(t, err)
		require.Equal(t, Event{ID: "evt_1", Type: "order.created", Payload: conformanceBody}, requireOneEvent(t, delivery))
	})

	t.Run("EitherSecretVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		for _, secret := range s.secrets { // the old one too: senders keep it for a while
			_, err := bundle.verifier.Verify(conformanceBody, s.sign(t, secret, testNow, "evt_1", conformanceBody))
			require.NoError(t, err)
		}
	})

	t.Run("OldSecretStillVerifiesWhenConfiguredAlone", func(t *testing.T) {
		t.Parallel()
		verifier, err := New(s.provider, pinnedConfig(testNow, s.secrets[0]))
		require.NoError(t, err)
		_, err = verifier.Verify(conformanceBody, s.sign(t, s.secrets[0], testNow, "evt_1", conformanceBody))
		require.NoError(t, err)
		_, err = verifier.Verify(conformanceBody, s.sign(t, s.secrets[1], testNow, "evt_1", conformanceBody))
		requireRejected(t, err, ErrSignatureInvalid, s.secrets[:]...)
	})

	t.Run("UnknownSecretIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		_, err := bundle.verifier.Verify(conformanceBody, s.sign(t, s.unknownSecret, testNow, "evt_1", conformanceBody))
		requireRejected(t, err, ErrSignatureInvalid, bundle.secrets...)
	})

	t.Run("TamperedBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		header := s.sign(t, s.secrets[0], testNow, "evt_1", conformanceBody)
		for _, body := range [][]byte{
			[]byte(`{"id":"evt_1","type":"order.created","data":{"object":{"id":"ord_2"}}}`),
			append(append([]byte{}, conformanceBody...), '\n'),
			conformanceBody[:len(conformanceBody)-1],
			nil,
		} {
			_, err := bundle.verifier.Verify(body, header)
			requireRejected(t, err, ErrSignatureInvalid, bundle.secrets...)
		}
	})

	t.Run("SignatureOfAnotherBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		header := s.sign(t, s.secrets[0], testNow, "evt_1", conformanceBody)
		other := s.sign(t, s.secrets[0], testNow, "evt_1", []byte(`{"id":"evt_2"}`))
		s.setSignature(header, s.signature(other))
		_, err := bundle.verifier.Verify(conformanceBody, header)
		requireRejected(t, err, ErrSignatureInvalid, bundle.secrets...)
	})

	t.Run("EverySingleBitFlipOfTheSignatureBytesIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		header := s.sign(t, s.secrets[0], testNow, "evt_1", conformanceBody)
		mac, err := s.decode(s.signature(header))
		require.NoError(t, err)
		require.Len(t, mac, 32)
		for bit := range len(mac) * 8 {
			flipped := append([]byte{}, mac...)
			flipped[bit/8] ^= 1 << (bit % 8)
			s.setSignature(header, s.encode(flipped))
			_, err := bundle.verifier.Verify(conformanceBody, header)
			requireRejected(t, err, ErrSignatureInvalid, bundle.secrets...)
		}
	})

	t.Run("EverySingleBitFlipOfTheEncodedSignatureIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		header := s.sign(t, s.secrets[0], testNow, "evt_1", conformanceBody)
		encoded := s.signature(header)
		for bit := range len(encoded) * 8 {
			flipped := []byte(encoded)
			flipped[bit/8] ^= 1 << (bit % 8)
			s.setSignature(header, string(flipped))
			_, err := bundle.verifier.Verify(conformanceBody, header)
			requireRejected(t, err, ErrSignatureInvalid, bundle.secrets...)
		}
	})

	t.Run("MissingOrEmptySignatureHeaderIsMissing", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		header := s.sign(t, s.secrets[0], testNow, "evt_1", conformanceBody)
		header.Del(s.signatureHeader)
		_, err := bundle.verifier.Verify(conformanceBody, header)
		requireRejected(t, err, ErrSignatureMissing, bundle.secrets...)
		header.Set(s.signatureHeader, "")
		_, err = bundle.verifier.Verify(conformanceBody, header)
		requireRejected(t, err, ErrSignatureMissing, bundle.secrets...)
	})

	t.Run("IgnoredSchemeVersionAloneIsInvalid", func(t *testing.T) {
		t.Parallel()
		if s.ignoredVersions == nil {
			t.Skip("the scheme has no versions")
		}
		bundle := setupConformance(t, s)
		for _, header := range s.ignoredVersions(s.sign(t, s.secrets[0], testNow, "evt_1", conformanceBody)) {
			_, err := bundle.verifier.Verify(conformanceBody, header)
			requireRejected(t, err, ErrSignatureInvalid, bundle.secrets...)
		}
	})

	testConformanceTimestamps(t, s)
	testConformanceParseErrors(t, s)
}

func testConformanceTimestamps(t *testing.T, s signer) {
	t.Run("TimestampsAtTheEdgesOfToleranceVerify", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		for _, at := range []time.Time{testNow.Add(-DefaultTolerance), testNow.Add(DefaultTolerance)} {
			_, err := bundle.verifier.Verify(conformanceBody, s.sign(t, s.secrets[0], at, "evt_1", conformanceBody))
			require.NoError(t, err)
		}
	})

	t.Run("StaleOrFutureTimestampIsOutsideTolerance", func(t *testing.T) {
		t.Parallel()
		if !s.timestamped {
			t.Skip("the scheme signs no timestamp")
		}
		bundle := setupConformance(t, s)
		for _, at := range []time.Time{
			testNow.Add(-DefaultTolerance - time.Second), testNow.Add(DefaultTolerance + time.Second),
			testNow.Add(-30 * 24 * time.Hour), testNow.Add(365 * 24 * time.Hour), time.Unix(0, 0),
		} {
			_, err := bundle.verifier.Verify(conformanceBody, s.sign(t, s.secrets[0], at, "evt_1", conformanceBody))
			requireRejected(t, err, ErrTimestampOutsideTolerance, bundle.secrets...)
		}
	})
}
