package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// hugeBodyBytes is the size of the huge bodies of the tests: twice the
// receiver's default max_body_bytes (1 MiB), which a source may raise
// (GitHub's preset is 25 MiB). It is enough to show a verifier that panics,
// quotes the body or does work per byte beyond a hash and one parse, and
// small enough that -race runs stay short on 2 cores.
const hugeBodyBytes = 2 << 20

// conformanceBundle is what each conformance case gets: a verifier
// configured with a signer's old and new secrets and the pinned clock.
type conformanceBundle struct {
	verifier Verifier
	secrets  []string // every credential a message must not quote
}

func setupConformance(t *testing.T, s signer) *conformanceBundle {
	t.Helper()
	verifier, err := New(s.provider, s.newConfig(s.secrets[:]...))
	require.NoError(t, err)
	return &conformanceBundle{verifier: verifier, secrets: s.secretsNotToQuote()}
}

// requireRejected requires r to be refused with sentinel.
func (b *conformanceBundle) requireRejected(t *testing.T, r request, sentinel error) {
	t.Helper()
	_, err := b.verifier.Verify(r.body, r.header)
	requireRejected(t, err, sentinel, b.secrets...)
}

// requireEvents requires delivery to hold the storable events of a delivery
// r of ids.
func (s signer) requireEvents(t *testing.T, delivery *Delivery, r request, ids ...string) {
	t.Helper()
	require.NotNil(t, delivery)
	require.Nil(t, delivery.Reply)
	want := s.want(ids...)
	require.Len(t, delivery.Events, len(want))
	for i, event := range delivery.Events {
		require.NoError(t, event.ParseError)
		got := Event{ID: event.ID, Type: event.Type, TwinKey: event.TwinKey}
		require.Equal(t, want[i], got, "event %d", i)
		if s.batch || s.formBody {
			require.True(t, json.Valid(event.Payload), "event %d: payload %q", i, event.Payload)
			require.Contains(t, string(event.Payload), ids[i])
		} else {
			require.Equal(t, r.body, event.Payload)
		}
	}
}

// TestConformance runs every case for every provider.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("EveryRegisteredProviderHasASigner", func(t *testing.T) {
		t.Parallel()
		var names []string
		for _, newSigner := range conformanceSigners {
			names = append(names, newSigner().provider)
		}
		require.ElementsMatch(t, Names(), names)
	})
	for _, newSigner := range conformanceSigners {
		s := newSigner()
		t.Run(s.provider, func(t *testing.T) {
			t.Parallel()
			requireSignerWellFormed(t, s)
			testConformance(t, s)
		})
	}
}

func testConformance(t *testing.T, s signer) {
	t.Run("ValidDeliveryVerifies", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1")
		r.header.Set("Content-Type", "text/plain; charset=latin1") // never consulted
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		s.requireEvents(t, delivery, r, "evt_1")
		if s.signatureHeader != "" {
			require.Equal(t, r.header.Get(s.signatureHeader), delivery.Headers[http.CanonicalHeaderKey(s.signatureHeader)])
		}
		require.NotContains(t, delivery.Headers, "Content-Type")
		require.NotContains(t, delivery.Headers, "Authorization") // a credential
	})

	t.Run("SignOutputVerifies", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		signed, err := Sign(s.signParams("evt_1", s.want("evt_1")[0].Type))
		require.NoError(t, err)
		delivery, err := bundle.verifier.Verify(signed.Body, signed.Header)
		require.NoError(t, err)
		s.requireEvents(t, delivery, request{signed.Header, signed.Body}, "evt_1")
	})

	// A signer refuses to sign without the event id or type exactly when the
	// provider reads it from a header: what it does sign is stored with both,
	// and what it refuses would be stored without.
	t.Run("SignRequiresTheIDAndTypeOfHeadersOnly", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		want := s.want("evt_1")[0]
		for _, c := range []struct {
			id, typ string
			missing error
		}{{"", want.Type, ErrEventIDRequired}, {"evt_1", "", ErrEventTypeRequired}} {
			signed, err := Sign(s.signParams(c.id, c.typ))
			if errors.Is(err, c.missing) {
				r := s.valid(t, "evt_1")
				if errors.Is(c.missing, ErrEventIDRequired) {
					r = s.deliver(t, s.secrets[0], testNow, "", s.body("evt_1"))
				} else {
					requireDeleteHeaderValued(t, r.header, want.Type)
				}
				delivery, err := bundle.verifier.Verify(r.body, r.header)
				require.NoError(t, err)
				event := delivery.Events[0]
				require.True(t, event.ParseError != nil || event.Type == "", "refused %v, yet a delivery without it is stored: %+v", c.missing, event)
				continue
			}
			require.NoError(t, err, "signing with id %q and type %q", c.id, c.typ)
			delivery, err := bundle.verifier.Verify(signed.Body, signed.Header)
			require.NoError(t, err)
			for _, event := range delivery.Events {
				require.NoError(t, event.ParseError, "signed without %v", c.missing)
				require.NotEmpty(t, event.ID)
				require.Equal(t, want.Type, event.Type, "signed without %v", c.missing)
			}
		}
	})

	t.Run("EitherSecretVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		for _, secret := range s.secrets { // the old one too: senders keep it for a while
			r := s.deliver(t, secret, testNow, "evt_1", s.body("evt_1"))
			delivery, err := bundle.verifier.Verify(r.body, r.header)
			require.NoError(t, err)
			s.requireEvents(t, delivery, r, "evt_1")
		}
	})

	t.Run("OldSecretStillVerifiesWhenConfiguredAlone", func(t *testing.T) {
		t.Parallel()
		verifier, err := New(s.provider, s.newConfig(s.secrets[0]))
		require.NoError(t, err)
		bundle := &conformanceBundle{verifier: verifier, secrets: s.secretsNotToQuote()}
		r := s.valid(t, "evt_1")
		_, err = verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		bundle.requireRejected(t, s.deliver(t, s.secrets[1], testNow, "evt_1", s.body("evt_1")), ErrSignatureInvalid)
	})

	t.Run("UnknownSecretIsInvalid", func(t *testing.T) {
		t.Parallel()
		setupConformance(t, s).requireRejected(t, s.deliver(t, s.unknownSecret, testNow, "evt_1", s.body("evt_1")),
			ErrSignatureInvalid)
	})

	t.Run("TamperedBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1")
		for _, body := range s.tampered(r.body) {
			require.NotEqual(t, r.body, body)
			bundle.requireRejected(t, request{r.header, body}, ErrSignatureInvalid)
		}
	})

	t.Run("SignatureOfAnotherBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		other := s.valid(t, "evt_2")
		bundle.requireRejected(t, s.setSignature(s.valid(t, "evt_1"), s.signature(other)), ErrSignatureInvalid)
	})

	t.Run("EverySingleBitFlipOfTheSignatureBytesIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1")
		mac, err := s.decode(s.signature(r))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(mac), 20)
		for bit := range len(mac) * 8 {
			flipped := bytes.Clone(mac)
			flipped[bit/8] ^= 1 << (bit % 8)
			bundle.requireRejected(t, s.setSignature(r, s.encode(flipped)), ErrSignatureInvalid)
		}
	})

	t.Run("EverySingleBitFlipOfTheEncodedSignatureIsInvalid", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1")
		encoded := s.signature(r)
		require.NotEmpty(t, encoded)
		for bit := range len(encoded) * 8 {
			flipped := []byte(encoded)
			flipped[bit/8] ^= 1 << (bit % 8)
			bundle.requireRejected(t, s.setSignature(r, string(flipped)), ErrSignatureInvalid)
		}
	})

	t.Run("MissingOrEmptySignatureIsMissing", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		for _, r := range s.dropped(s.valid(t, "evt_1")) {
			bundle.requireRejected(t, r, ErrSignatureMissing)
		}
	})

	t.Run("WrongAlgorithmOrVersionPrefixIsInvalid", func(t *testing.T) {
		t.Parallel()
		if s.wrongPrefixes == nil {
			t.Skip("the scheme has no prefixes")
		}
		bundle := setupConformance(t, s)
		for _, r := range s.wrongPrefixes(s.valid(t, "evt_1")) {
			bundle.requireRejected(t, r, ErrSignatureInvalid)
		}
	})

	testConformanceBasicAuth(t, s)
	testConformanceTimestamps(t, s)
	testConformanceBodies(t, s)
	testConformanceBatches(t, s)
	testConformanceParseErrors(t, s)
	testConformanceReverify(t, s)
	testConformanceInvalidSecret(t, s)
}

// testConformanceInvalidSecret configures the provider with its secret
// spoiled by every byte value in turn, at its first, middle and last
// position (issue 38: encoding/hex's error names the offending byte,
// encoding/base64's its offset). The secrets it refuses must all get one
// message, which then carries nothing of the secret but its index.
func testConformanceInvalidSecret(t *testing.T, s signer) {
	t.Run("InvalidSecretErrorCarriesNothingOfIt", func(t *testing.T) {
		t.Parallel()
		valid := s.secrets[0]
		messages := map[string]string{} // message → one secret that got it
		for _, at := range []int{0, len(valid) / 2, len(valid) - 1} {
			for b := range 256 {
				spoiled := valid[:at] + string([]byte{byte(b)}) + valid[at+1:]
				verifier, err := New(s.provider, s.newConfig(valid, spoiled))
				if err == nil {
					continue // the provider takes any bytes as its key
				}
				require.Nil(t, verifier)
				require.NotContains(t, err.Error(), spoiled)
				messages[err.Error()] = fmt.Sprintf("%q", spoiled)
			}
		}
		require.LessOrEqual(t, len(messages), 1, "the message depends on the secret: %v", messages)
		for message := range messages {
			require.Contains(t, message, "secrets[1]", "the message names the secret by its index")
		}
	})
}

// testConformanceReverify re-verifies a delivery from what the inbox stores
// of it: the raw body and Delivery.Headers, never Basic Auth.
func testConformanceReverify(t *testing.T, s signer) {
	// stored verifies r with both secrets, as the receiver did, and returns
	// what the inbox keeps of it.
	stored := func(t *testing.T, r request) map[string]string {
		t.Helper()
		delivery, err := setupConformance(t, s).verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		require.NotContains(t, delivery.Headers, "Authorization")
		return delivery.Headers
	}
	oldSecret, newSecret := s.secrets[0], s.secrets[1]

	t.Run("ReverifyNamesTheSecretThatSigned", func(t *testing.T) {
		t.Parallel()
		r := s.deliver(t, oldSecret, testNow, "evt_1", s.body("evt_1"))
		headers := stored(t, r)
		for _, c := range []struct {
			secrets []string
			want    int
		}{
			{[]string{newSecret, oldSecret}, 1}, // the current one first, the older one still listed
			{[]string{oldSecret, newSecret}, 0},
			{[]string{oldSecret}, 0},
		} {
			got, err := Reverify(s.provider, s.newConfig(c.secrets...), r.body, headers)
			require.NoError(t, err, "secrets %d", len(c.secrets))
			require.Equal(t, c.want, got)
		}
		got, err := Reverify(s.provider, s.newConfig(newSecret, s.unknownSecret), r.body, headers)
		requireRejected(t, err, ErrSignatureInvalid, s.secretsNotToQuote()...)
		require.Equal(t, -1, got)
	})

	t.Run("ReverifyRefusesAlteredBytes", func(t *testing.T) {
		t.Parallel()
		r := s.deliver(t, oldSecret, testNow, "evt_1", s.body("evt_1"))
		headers := stored(t, r)
		for _, body := range s.tampered(r.body) {
			_, err := Reverify(s.provider, s.newConfig(newSecret, oldSecret), body, headers)
			requireRejected(t, err, ErrSignatureInvalid, s.secretsNotToQuote()...)
		}
	})

	t.Run("ReverifyChecksTimestampsAgainstConfigNow", func(t *testing.T) {
		t.Parallel()
		r := s.deliver(t, oldSecret, testNow, "evt_1", s.body("evt_1"))
		headers := stored(t, r)
		config := s.newConfig(newSecret, oldSecret)
		config.Now = func() time.Time { return testNow.Add(365 * 24 * time.Hour) }
		got, err := Reverify(s.provider, config, r.body, headers)
		if !s.timestamped {
			require.NoError(t, err, "nothing signed carries a time")
			require.Equal(t, 1, got)
			return
		}
		requireRejected(t, err, ErrTimestampOutsideTolerance, s.secretsNotToQuote()...)
	})
}

func testConformanceBasicAuth(t *testing.T, s signer) {
	t.Run("EitherBasicAuthCredentialVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		if !s.basicAuth {
			t.Skip("the provider has no Basic Auth")
		}
		bundle := setupConformance(t, s)
		for _, cred := range conformanceBasicAuth {
			r := s.valid(t, "evt_1")
			setBasicAuth(r.header, cred)
			_, err := bundle.verifier.Verify(r.body, r.header)
			require.NoError(t, err)
		}
	})

	t.Run("MissingBasicAuthIsMissing", func(t *testing.T) {
		t.Parallel()
		if !s.basicAuth {
			t.Skip("the provider has no Basic Auth")
		}
		bundle := setupConformance(t, s)
		for _, value := range []string{"", "Bearer " + conformanceBasicAuth[1].Password, "Basic !!!"} {
			r := s.valid(t, "evt_1")
			r.header.Set("Authorization", value)
			bundle.requireRejected(t, r, ErrSignatureMissing)
		}
	})

	t.Run("WrongBasicAuthIsInvalid", func(t *testing.T) {
		t.Parallel()
		if !s.basicAuth {
			t.Skip("the provider has no Basic Auth")
		}
		bundle := setupConformance(t, s)
		old, current := conformanceBasicAuth[0], conformanceBasicAuth[1]
		for _, cred := range []BasicAuth{
			{Username: old.Username, Password: current.Password}, // crossed pairs
			{Username: current.Username, Password: old.Password},
			{Username: current.Username, Password: current.Password + "x"},
			{Username: current.Username, Password: ""},
			{Username: "HOOKINBOX-NEW", Password: current.Password},
			{},
		} {
			r := s.valid(t, "evt_1")
			setBasicAuth(r.header, cred)
			bundle.requireRejected(t, r, ErrSignatureInvalid)
		}
	})
}

func testConformanceTimestamps(t *testing.T, s signer) {
	t.Run("TimestampsAtTheEdgesOfToleranceVerify", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		for _, at := range []time.Time{testNow.Add(-DefaultTolerance), testNow.Add(DefaultTolerance)} {
			r := s.deliver(t, s.secrets[0], at, "evt_1", s.body("evt_1"))
			_, err := bundle.verifier.Verify(r.body, r.header)
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
			bundle.requireRejected(t, s.deliver(t, s.secrets[0], at, "evt_1", s.body("evt_1")), ErrTimestampOutsideTolerance)
		}
	})

	t.Run("MissingOrEmptyTimestampIsMissing", func(t *testing.T) {
		t.Parallel()
		if s.timestampHeader == "" {
			t.Skip("the scheme has no timestamp header of its own")
		}
		bundle := setupConformance(t, s)
		deleted, empty := s.valid(t, "evt_1"), s.valid(t, "evt_1")
		deleted.header.Del(s.timestampHeader)
		empty.header.Set(s.timestampHeader, "")
		bundle.requireRejected(t, deleted, ErrSignatureMissing)
		bundle.requireRejected(t, empty, ErrSignatureMissing)
	})

	t.Run("AlteredTimestampIsInvalid", func(t *testing.T) {
		t.Parallel()
		if s.timestampHeader == "" {
			t.Skip("the scheme has no timestamp header of its own")
		}
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1")
		signed := r.header.Get(s.timestampHeader)
		for _, timestamp := range []string{"1700000001", "1699999999", "+" + signed, "0" + signed, signed + ".0", signed + " "} {
			altered := r.clone()
			altered.header.Set(s.timestampHeader, timestamp)
			bundle.requireRejected(t, altered, ErrSignatureInvalid)
		}
	})
}

func testConformanceBodies(t *testing.T, s signer) {
	t.Run("EmptyBody", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		// Under the signature of another body: never authentic.
		r := s.valid(t, "evt_1")
		_, err := bundle.verifier.Verify(nil, r.header)
		requireNotAuthentic(t, err)

		r = s.deliver(t, s.secrets[0], testNow, "evt_1", nil)
		if s.emptyBody != nil {
			bundle.requireRejected(t, r, s.emptyBody)
			return
		}
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err, "an authentic delivery is not an error")
		require.NotEmpty(t, delivery.Events)
		for _, event := range delivery.Events {
			require.ErrorContains(t, event.ParseError, "body is empty")
			require.Nil(t, event.Payload)
		}
	})

	t.Run("HugeBodyVerifies", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		// Verifiers have no size limit of their own: the receiver's body
		// limit (413) comes first.
		body := s.padded(s.body("evt_1"), hugeBodyBytes)
		r := s.deliver(t, s.secrets[0], testNow, "evt_1", body)
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		s.requireEvents(t, delivery, r, "evt_1")
	})

	t.Run("NonUTF8BytesAreNeverStoredAsAPayload", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		for _, bad := range []string{"\xff", "\xe9", "\xed\xa0\x80", "\xc0\xaf"} {
			body := bytes.Replace(s.body("evt_1"), []byte("evt_1"), []byte("evt_"+bad+"1"), 1)
			require.False(t, utf8.Valid(body))
			r := s.deliver(t, s.secrets[0], testNow, "evt_1", body)
			delivery, err := bundle.verifier.Verify(r.body, r.header)
			require.NoError(t, err, "an authentic delivery is not an error: %q", r.body)
			require.NotEmpty(t, delivery.Events)
			for _, event := range delivery.Events {
				if event.ParseError != nil {
					require.Nil(t, event.Payload)
				} else {
					require.True(t, utf8.Valid(event.Payload), "payload %q", event.Payload)
				}
			}
			if !s.batch && !s.formBody {
				require.ErrorContains(t, requireOneEvent(t, delivery).ParseError, "not valid UTF-8")
			}
		}
	})
}

func testConformanceBatches(t *testing.T, s signer) {
	t.Run("BatchYieldsOneEventPerItemInOrder", func(t *testing.T) {
		t.Parallel()
		if !s.batch {
			t.Skip("the provider does not batch")
		}
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1", "evt_2", "evt_3")
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		s.requireEvents(t, delivery, r, "evt_1", "evt_2", "evt_3")
	})

	t.Run("BatchWithADuplicateInsideYieldsBothEvents", func(t *testing.T) {
		t.Parallel()
		if !s.batch {
			t.Skip("the provider does not batch")
		}
		// The inbox's claim skips the second: one statement, no conflict target.
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1", "evt_1")
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		s.requireEvents(t, delivery, r, "evt_1", "evt_1")
		require.Equal(t, delivery.Events[0].ID, delivery.Events[1].ID)
	})

	t.Run("OneTamperedItemRejectsTheWholeBatch", func(t *testing.T) {
		t.Parallel()
		if !s.batch {
			t.Skip("the provider does not batch")
		}
		bundle := setupConformance(t, s)
		r := s.valid(t, "evt_1", "evt_2")
		r.body = bytes.Replace(r.body, []byte("evt_2"), []byte("evt_3"), 1)
		bundle.requireRejected(t, r, ErrSignatureInvalid)
	})
}

// signParams returns what Sign needs to sign the conformance body of evt_1
// with the old secret at testNow, carrying id and typ.
func (s signer) signParams(id, typ string) *SignParams {
	return &SignParams{
		Provider: s.provider, Secret: s.secrets[0], EventID: id, EventType: typ,
		Time: testNow, Body: s.body("evt_1"), Config: s.newConfig(s.secrets[:]...),
	}
}

// requireDeleteHeaderValued deletes the headers whose value is value,
// requiring one.
func requireDeleteHeaderValued(t *testing.T, header http.Header, value string) {
	t.Helper()
	deleted := false
	for name, values := range header {
		if len(values) == 1 && values[0] == value {
			header.Del(name)
			deleted = true
		}
	}
	require.True(t, deleted, "no header carries %q", value)
}
