package provider

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// Derived vectors: Marqeta publishes none (/work/shared/providers.md §5; the
// docs' Ruby example signs with the secret "secret" and shows no digest).
// These were computed with the OpenSSL CLI, the library behind the docs'
// OpenSSL::HMAC.hexdigest, independently of this package:
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac secret
//	printf '%s' "$body" | openssl dgst -sha1 -hmac secret
const (
	marqetaVectorSecret = "secret"
	marqetaVectorItem   = `{"token":"txn_1","type":"authorization","state":"PENDING","amount":10.00,"currency_code":"USD"}`
	marqetaVectorBody   = `{"transactions":[` + marqetaVectorItem + `]}`
	marqetaVectorSHA256 = "7bc5fba0cc4f91ec1238d263b2f2f49bbc1223bb27daf00377720e031414ef76"
	marqetaVectorSHA1   = "0e244a641ac4b255cb0a209e1f2b2c91b1e92374"
)

// Basic Auth credentials of the tests, shaped like Marqeta's rules (a
// password of 20–50 characters with a digit, a lower, an upper and a symbol).
const (
	marqetaUser        = "hookinbox_marqeta"
	marqetaPassword    = "Marqeta-Passw0rd-2026!"
	marqetaNewUser     = "hookinbox_marqeta_v2"
	marqetaNewPassword = "Rotated-Passw0rd-2026#"
)

var marqetaAuth = []BasicAuth{{Username: marqetaUser, Password: marqetaPassword}}

// marqetaSecret signs the tests' own deliveries: unlike the vectors'
// "secret", no error message can contain it by chance.
const marqetaSecret = "mq_hmac_7f3a9c21"

// The genuine signatures of marqetaVectorBody under marqetaSecret.
var (
	marqetaGenuineSHA256 = marqetaSign(marqetaSecret, []byte(marqetaVectorBody))
	marqetaGenuineSHA1   = marqetaSignSHA1(marqetaSecret, []byte(marqetaVectorBody))
)

func newTestMarqeta(t testing.TB, algorithm string, secrets ...string) *marqetaVerifier {
	t.Helper()
	marqeta, err := newMarqetaVerifier(&Config{Secrets: secrets, BasicAuth: marqetaAuth, Algorithm: algorithm, Now: pinnedConfig(testNow).Now})
	require.NoError(t, err)
	return marqeta
}

// marqetaHeader returns a delivery's headers: Basic Auth unless username is
// empty, and X-Marqeta-Signature unless signature is empty.
func marqetaHeader(username, password, signature string) http.Header {
	req := &http.Request{Header: http.Header{}}
	if username != "" {
		req.SetBasicAuth(username, password)
	}
	if signature != "" {
		req.Header.Set("X-Marqeta-Signature", signature)
	}
	return req.Header
}

// marqetaSign is the tests' own hex HMAC-SHA256, independent of SignMarqeta.
func marqetaSign(secret string, body []byte) string {
	return hex.EncodeToString(referenceHMAC([]byte(secret), body))
}

// marqetaSignSHA1 is the tests' own hex HMAC-SHA1.
func marqetaSignSHA1(secret string, body []byte) string {
	return hex.EncodeToString(referenceMAC(sha1.New, []byte(secret), body))
}

// marqetaDelivery returns genuine headers for body under secret.
func marqetaDelivery(secret string, body []byte) http.Header {
	return marqetaHeader(marqetaUser, marqetaPassword, marqetaSign(secret, body))
}

// marqetaTransaction is a transaction notification with token.
func marqetaTransaction(token string) string {
	return fmt.Sprintf(`{"token":%q,"type":"authorization","state":"PENDING","amount":1.5}`, token)
}

// marqetaBody is a batch of items under category.
func marqetaBody(category string, items ...string) []byte {
	return []byte(`{"` + category + `":[` + strings.Join(items, ",") + `]}`)
}

func init() {
	registerConformance(marqetaSigner)
}

// marqetaSigner delivers batches of transactions signed with HMAC-SHA256,
// the suite adding the Basic Auth that Marqeta always sends.
func marqetaSigner() signer {
	get, set := headerSignature("X-Marqeta-Signature", "")
	return signer{
		provider:      "marqeta",
		secrets:       [2]string{"mq_hmac_old_0c5e1d44", marqetaSecret},
		unknownSecret: "mq_hmac_unknown_9b2f",
		body: func(ids ...string) []byte {
			items := make([]string, len(ids))
			for i, id := range ids {
				items[i] = marqetaTransaction(id)
			}
			return marqetaBody("transactions", items...)
		},
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			return request{header: marqetaHeader("", "", marqetaSign(secret, body)), body: body}
		},
		want: func(ids ...string) []Event {
			events := make([]Event, len(ids))
			for i, id := range ids {
				events[i] = Event{ID: "transactions:" + id, Type: "transactions"}
			}
			return events
		},
		signature:       get,
		setSignature:    set,
		decode:          hex.DecodeString,
		encode:          hex.EncodeToString,
		signatureHeader: "X-Marqeta-Signature",
		wrongPrefixes: func(r request) []request {
			return replacePrefix(r, "X-Marqeta-Signature", "", "sha256=", "sha1=", "v1=", " ")
		},
		basicAuth:  true,
		batch:      true,
		idFromBody: true,
	}
}

func TestMarqeta(t *testing.T) {
	t.Parallel()

	t.Run("DerivedVectorsVerify", func(t *testing.T) {
		t.Parallel()
		for algorithm, signature := range map[string]string{"": marqetaVectorSHA256, "sha256": marqetaVectorSHA256, "sha1": marqetaVectorSHA1} {
			marqeta := newTestMarqeta(t, algorithm, marqetaVectorSecret)
			delivery, err := marqeta.Verify([]byte(marqetaVectorBody), marqetaHeader(marqetaUser, marqetaPassword, signature))
			require.NoError(t, err, algorithm)
			require.Equal(t, Event{ID: "transactions:txn_1", Type: "transactions", Payload: []byte(marqetaVectorItem)},
				requireOneEvent(t, delivery))
			require.Equal(t, map[string]string{"X-Marqeta-Signature": signature}, delivery.Headers, "Authorization is never kept")
			require.Nil(t, delivery.Reply)
		}
	})

	t.Run("SignMarqetaReproducesTheDerivedVectors", func(t *testing.T) {
		t.Parallel()
		for algorithm, expected := range map[string]string{"": marqetaVectorSHA256, "sha256": marqetaVectorSHA256, "sha1": marqetaVectorSHA1} {
			signature, err := sign.Marqeta(algorithm, marqetaVectorSecret, []byte(marqetaVectorBody))
			require.NoError(t, err)
			require.Equal(t, expected, signature)
		}
		require.Equal(t, marqetaVectorSHA256, marqetaSign(marqetaVectorSecret, []byte(marqetaVectorBody)))
		require.Equal(t, marqetaVectorSHA1, marqetaSignSHA1(marqetaVectorSecret, []byte(marqetaVectorBody)))
		_, err := sign.Marqeta("sha512", marqetaVectorSecret, nil)
		require.ErrorContains(t, err, "algorithm")
	})

	t.Run("BasicAuthIsRequiredByTheConfig", func(t *testing.T) {
		t.Parallel()
		for _, config := range []*Config{{}, {Secrets: []string{"secret"}}, {BasicAuth: []BasicAuth{}}} {
			verifier, err := New("marqeta", config)
			require.ErrorContains(t, err, "basic_auth")
			require.Nil(t, verifier)
		}
	})

	t.Run("UnknownAlgorithmIsAConfigError", func(t *testing.T) {
		t.Parallel()
		for _, algorithm := range []string{"sha512", "SHA256", "HMAC_SHA_256", "md5", " sha1"} {
			verifier, err := New("marqeta", &Config{BasicAuth: marqetaAuth, Secrets: []string{"secret"}, Algorithm: algorithm})
			require.ErrorContains(t, err, "algorithm", algorithm)
			require.Nil(t, verifier)
		}
	})

	t.Run("MissingBasicAuthIsMissing", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		body := []byte(marqetaVectorBody)
		for _, authorization := range []string{"", "Bearer " + marqetaPassword, "Basic", "Basic !!!"} {
			header := marqetaHeader("", "", marqetaSign(marqetaSecret, body))
			if authorization != "" {
				header.Set("Authorization", authorization)
			}
			_, err := marqeta.Verify(body, header)
			requireRejected(t, err, ErrSignatureMissing, marqetaPassword, marqetaSecret)
		}
	})

	t.Run("WrongBasicAuthIsInvalid", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		body := []byte(marqetaVectorBody)
		signature := marqetaSign(marqetaSecret, body)
		for _, pair := range [][2]string{
			{marqetaUser, marqetaPassword + "x"}, {marqetaUser, marqetaPassword[1:]}, {marqetaUser, ""},
			{marqetaUser + "x", marqetaPassword}, {strings.ToUpper(marqetaUser), marqetaPassword},
			{marqetaPassword, marqetaUser}, {marqetaNewUser, marqetaNewPassword}, {marqetaUser, marqetaNewPassword},
		} {
			_, err := marqeta.Verify(body, marqetaHeader(pair[0], pair[1], signature))
			requireRejected(t, err, ErrSignatureInvalid, marqetaPassword, marqetaNewPassword, marqetaSecret)
		}
	})

	t.Run("EitherBasicAuthPairVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		marqeta, err := newMarqetaVerifier(&Config{
			Secrets:   []string{marqetaSecret},
			BasicAuth: []BasicAuth{{marqetaUser, marqetaPassword}, {marqetaNewUser, marqetaNewPassword}},
		})
		require.NoError(t, err)
		body := []byte(marqetaVectorBody)
		signature := marqetaSign(marqetaSecret, body)
		for _, pair := range [][2]string{{marqetaUser, marqetaPassword}, {marqetaNewUser, marqetaNewPassword}} {
			_, err := marqeta.Verify(body, marqetaHeader(pair[0], pair[1], signature))
			require.NoError(t, err, pair[0])
		}
		for _, pair := range [][2]string{{marqetaUser, marqetaNewPassword}, {marqetaNewUser, marqetaPassword}} {
			_, err := marqeta.Verify(body, marqetaHeader(pair[0], pair[1], signature))
			requireRejected(t, err, ErrSignatureInvalid, marqetaPassword, marqetaNewPassword)
		}
	})

	t.Run("SignatureIsOptionalWithoutSecrets", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "")
		body := []byte(marqetaVectorBody)
		for _, signature := range []string{"", marqetaGenuineSHA256, "not checked: no secret is configured"} {
			delivery, err := marqeta.Verify(body, marqetaHeader(marqetaUser, marqetaPassword, signature))
			require.NoError(t, err, signature)
			require.Equal(t, "transactions:txn_1", requireOneEvent(t, delivery).ID)
		}
		_, err := marqeta.Verify(body, marqetaHeader(marqetaUser, "wrong", ""))
		requireRejected(t, err, ErrSignatureInvalid, marqetaPassword)
	})

	t.Run("SignatureIsRequiredWhenSecretsAreConfigured", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		header := marqetaHeader(marqetaUser, marqetaPassword, "")
		_, err := marqeta.Verify([]byte(marqetaVectorBody), header)
		requireRejected(t, err, ErrSignatureMissing, marqetaSecret, marqetaPassword)
		header["X-Marqeta-Signature"] = []string{""}
		_, err = marqeta.Verify([]byte(marqetaVectorBody), header)
		requireRejected(t, err, ErrSignatureMissing, marqetaSecret, marqetaPassword)
	})

	t.Run("BothChecksMustPass", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		body := []byte(marqetaVectorBody)
		_, err := marqeta.Verify(body, marqetaHeader(marqetaUser, "wrong", marqetaGenuineSHA256))
		requireRejected(t, err, ErrSignatureInvalid, marqetaSecret, marqetaPassword)
		_, err = marqeta.Verify(body, marqetaHeader(marqetaUser, marqetaPassword, marqetaSign("wrong", body)))
		requireRejected(t, err, ErrSignatureInvalid, marqetaSecret, marqetaPassword)
		_, err = marqeta.Verify(body, marqetaHeader("", "", marqetaGenuineSHA256))
		requireRejected(t, err, ErrSignatureMissing, marqetaSecret, marqetaPassword)
	})

	t.Run("EitherSecretVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", "old_marqeta_secret", "new_marqeta_secret")
		body := []byte(marqetaVectorBody)
		for _, secret := range []string{"old_marqeta_secret", "new_marqeta_secret"} {
			_, err := marqeta.Verify(body, marqetaDelivery(secret, body))
			require.NoError(t, err, secret)
		}
		_, err := marqeta.Verify(body, marqetaDelivery("unknown_marqeta_secret", body))
		requireRejected(t, err, ErrSignatureInvalid, "old_marqeta_secret", "new_marqeta_secret", "unknown_marqeta_secret")
		_, err = newTestMarqeta(t, "", "old_marqeta_secret").Verify(body, marqetaDelivery("new_marqeta_secret", body))
		requireRejected(t, err, ErrSignatureInvalid, "old_marqeta_secret", "new_marqeta_secret")
	})

	t.Run("SignatureUnderTheOtherAlgorithmIsInvalid", func(t *testing.T) {
		t.Parallel()
		body := []byte(marqetaVectorBody)
		_, err := newTestMarqeta(t, "sha256", marqetaSecret).Verify(body, marqetaHeader(marqetaUser, marqetaPassword, marqetaGenuineSHA1))
		requireRejected(t, err, ErrSignatureInvalid, marqetaSecret)
		_, err = newTestMarqeta(t, "sha1", marqetaSecret).Verify(body, marqetaHeader(marqetaUser, marqetaPassword, marqetaGenuineSHA256))
		requireRejected(t, err, ErrSignatureInvalid, marqetaSecret)
	})

	t.Run("TamperedBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		header := marqetaHeader(marqetaUser, marqetaPassword, marqetaGenuineSHA256)
		for _, body := range []string{
			strings.Replace(marqetaVectorBody, "10.00", "100.00", 1),
			strings.Replace(marqetaVectorBody, "txn_1", "txn_2", 1),
			marqetaVectorBody + "\n",
			marqetaVectorBody[:len(marqetaVectorBody)-1],
			`{"pings":[{"token":"marqeta","payload":"healthcheck"}]}`,
			"",
		} {
			_, err := marqeta.Verify([]byte(body), header)
			requireRejected(t, err, ErrSignatureInvalid, marqetaSecret)
		}
	})

	t.Run("EverySingleBitFlipOfTheSignatureIsInvalid", func(t *testing.T) {
		t.Parallel()
		body := []byte(marqetaVectorBody)
		for algorithm, signature := range map[string]string{"sha256": marqetaGenuineSHA256, "sha1": marqetaGenuineSHA1} {
			marqeta := newTestMarqeta(t, algorithm, marqetaSecret)
			mac, err := hex.DecodeString(signature)
			require.NoError(t, err)
			for bit := range len(mac) * 8 {
				flipped := bytes.Clone(mac)
				flipped[bit/8] ^= 1 << (bit % 8)
				_, err := marqeta.Verify(body, marqetaHeader(marqetaUser, marqetaPassword, hex.EncodeToString(flipped)))
				requireRejected(t, err, ErrSignatureInvalid, marqetaSecret)
			}
			for bit := range len(signature) * 8 { // of the hex text: 'a'^0x20 is 'A'
				flipped := []byte(signature)
				flipped[bit/8] ^= 1 << (bit % 8)
				_, err := marqeta.Verify(body, marqetaHeader(marqetaUser, marqetaPassword, string(flipped)))
				requireRejected(t, err, ErrSignatureInvalid, marqetaSecret)
			}
		}
	})

	t.Run("OtherSpellingsOfTheGenuineMACAreInvalid", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		for _, spelling := range []string{
			strings.ToUpper(marqetaGenuineSHA256), "sha256=" + marqetaGenuineSHA256, " " + marqetaGenuineSHA256,
			marqetaGenuineSHA256 + "00", marqetaGenuineSHA256[:62], marqetaGenuineSHA256 + "," + marqetaGenuineSHA256,
		} {
			_, err := marqeta.Verify([]byte(marqetaVectorBody), marqetaHeader(marqetaUser, marqetaPassword, spelling))
			requireRejected(t, err, ErrSignatureInvalid, marqetaSecret)
		}
	})

	t.Run("BatchOfTenWithADuplicateInsideGivesTenEventsInBodyOrder", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		tokens := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t3", "t8", "t9"}
		items := make([]string, len(tokens))
		for i, token := range tokens {
			items[i] = marqetaTransaction(token)
		}
		body := marqetaBody("transactions", items...)
		delivery, err := marqeta.Verify(body, marqetaDelivery(marqetaSecret, body))
		require.NoError(t, err)
		require.Len(t, delivery.Events, 10)
		for i, event := range delivery.Events {
			require.Equal(t, Event{ID: "transactions:" + tokens[i], Type: "transactions", Payload: []byte(items[i])}, event)
		}
		require.Equal(t, delivery.Events[3].ID, delivery.Events[7].ID, "the inbox's claim skips the second")
	})

	t.Run("CategoriesKeepBodyOrderAndSpacing", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		body := []byte("{ \"usertransitions\" : [ {\"token\":\"ut_1\"} ] ,\n\"cardtransitions\":[{\"token\":\"ct_1\",\"type\":\"fulfillment.issued\"},\t{\"token\":\"ct_2\"}]}")
		delivery, err := marqeta.Verify(body, marqetaDelivery(marqetaSecret, body))
		require.NoError(t, err)
		require.Equal(t, []Event{
			{ID: "usertransitions:ut_1", Type: "usertransitions", Payload: []byte(`{"token":"ut_1"}`)},
			{ID: "cardtransitions:ct_1", Type: "cardtransitions", Payload: []byte(`{"token":"ct_1","type":"fulfillment.issued"}`)},
			{ID: "cardtransitions:ct_2", Type: "cardtransitions", Payload: []byte(`{"token":"ct_2"}`)},
		}, delivery.Events)
	})

	t.Run("PingsAloneAreAHealthCheckThatStoresNothing", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		for _, body := range []string{
			`{"pings":[{"token":"marqeta","payload":"healthcheck"}]}`,
			`{"pings":[]}`,
			`{"pings":[{"token":"a"},{"token":"b"}],"pings":[{}]}`,
			`{"pings":[{"token":"marqeta"}],"transactions":[]}`,
		} {
			delivery, err := marqeta.Verify([]byte(body), marqetaDelivery(marqetaSecret, []byte(body)))
			require.NoError(t, err, body)
			require.Equal(t, &Reply{Status: http.StatusOK}, delivery.Reply, body)
			require.Empty(t, delivery.Events, body)
		}
	})

	t.Run("PingsMustBeAuthenticToo", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		body := []byte(`{"pings":[{"token":"marqeta","payload":"healthcheck"}]}`)
		_, err := marqeta.Verify(body, marqetaHeader("", "", marqetaSign(marqetaSecret, body)))
		requireRejected(t, err, ErrSignatureMissing, marqetaSecret)
		_, err = marqeta.Verify(body, marqetaDelivery("wrong", body))
		requireRejected(t, err, ErrSignatureInvalid, marqetaSecret)
	})

	t.Run("PingsNextToOtherCategoriesAreSkipped", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		body := []byte(`{"pings":[{"token":"marqeta","payload":"healthcheck"}],"transactions":[` +
			marqetaTransaction("txn_1") + `],"pings":[{"token":"again"}]}`)
		delivery, err := marqeta.Verify(body, marqetaDelivery(marqetaSecret, body))
		require.NoError(t, err)
		require.Nil(t, delivery.Reply)
		require.Equal(t, Event{ID: "transactions:txn_1", Type: "transactions", Payload: []byte(marqetaTransaction("txn_1"))},
			requireOneEvent(t, delivery))
	})

	t.Run("NotificationWithoutAUsableTokenHasAParseErrorAndAHashedID", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		for _, bad := range []string{
			`{"type":"authorization"}`, `{"token":""}`, `{"token":42}`, `{"token":null}`, `{"Token":"t1"}`,
			`{"token":{"id":"t1"}}`, `{"token":"a\u0000b"}`, `{"token":"` + strings.Repeat("t", maxKeyBytes+1) + `"}`,
		} {
			body := marqetaBody("transactions", marqetaTransaction("txn_1"), bad, marqetaTransaction("txn_3"))
			delivery, err := marqeta.Verify(body, marqetaDelivery(marqetaSecret, body))
			require.NoError(t, err, bad)
			require.Len(t, delivery.Events, 3)
			require.Equal(t, "transactions:txn_1", delivery.Events[0].ID)
			require.Equal(t, "transactions:txn_3", delivery.Events[2].ID)
			event := delivery.Events[1]
			if strings.Contains(bad, `\u0000`) { // jsonb's refusal is the reason given
				require.ErrorContains(t, event.ParseError, `notification 1 of "transactions": body has \u0000`, bad)
			} else {
				require.ErrorContains(t, event.ParseError, `no event id: notification 1 of "transactions" has no usable "token"`, bad)
			}
			require.Equal(t, Event{ID: hashedID("transactions:", []byte(bad)), Type: "transactions", ParseError: event.ParseError}, event, bad)
		}
	})

	t.Run("UnstorableNotificationFailsAloneAndKeepsItsID", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		for bad, contains := range map[string]string{
			`{"token":"txn_2","memo":"a\u0000b"}`:        `\u0000`,
			"{\"token\":\"txn_2\",\"memo\":\"caf\xe9\"}": "not valid UTF-8",
			"{\"token\":\"txn_2\",\"\xff\":1}":           "not valid UTF-8",
			`{"token":"txn_2","memo":"\ud800"}`:          "surrogate",
		} {
			body := marqetaBody("transactions", marqetaTransaction("txn_1"), bad, marqetaTransaction("txn_3"))
			delivery, err := marqeta.Verify(body, marqetaDelivery(marqetaSecret, body))
			require.NoError(t, err, bad)
			require.Len(t, delivery.Events, 3)
			require.Equal(t, Event{ID: "transactions:txn_1", Type: "transactions", Payload: []byte(marqetaTransaction("txn_1"))}, delivery.Events[0])
			require.Equal(t, Event{ID: "transactions:txn_3", Type: "transactions", Payload: []byte(marqetaTransaction("txn_3"))}, delivery.Events[2])
			event := delivery.Events[1]
			require.ErrorContains(t, event.ParseError, contains, bad)
			require.ErrorContains(t, event.ParseError, `notification 1 of "transactions"`, bad)
			require.Equal(t, Event{ID: "transactions:txn_2", Type: "transactions", ParseError: event.ParseError}, event, bad)
		}
	})

	t.Run("NotificationThatIsNotAnObjectFailsAlone", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		for bad, contains := range map[string]string{
			`"txn_2"`: "string, not an object", `42`: "number, not an object", `null`: "null, not an object",
			`[{"token":"txn_2"}]`: "array, not an object", "\"\xff\"": "not valid UTF-8",
		} {
			body := marqetaBody("transactions", bad, marqetaTransaction("txn_3"))
			delivery, err := marqeta.Verify(body, marqetaDelivery(marqetaSecret, body))
			require.NoError(t, err, bad)
			require.Len(t, delivery.Events, 2)
			require.ErrorContains(t, delivery.Events[0].ParseError, contains, bad)
			require.Equal(t, hashedID("transactions:", []byte(bad)), delivery.Events[0].ID, bad)
			require.Nil(t, delivery.Events[0].Payload)
			require.NoError(t, delivery.Events[1].ParseError)
		}
	})

	t.Run("BodyThatIsNotABatchIsOneEventWithAParseError", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		tooMany := marqetaBody("transactions", slices.Repeat([]string{`{"token":"t"}`}, maxBatchItems+1)...)
		for body, contains := range map[string]string{
			"":                                   "body is empty",
			" \r\n\t":                            "body is empty",
			"token=txn_1":                        "not JSON",
			`{"transactions":[{"token":"t1"}]`:   "not JSON",
			`{"transactions":[]} {}`:             "not JSON",
			"\xef\xbb\xbf" + marqetaVectorBody:   "not JSON",
			`[` + marqetaTransaction("t1") + `]`: "array, not an object",
			`"transactions"`:                     "string, not an object",
			`42`:                                 "number, not an object",
			`true`:                               "bool, not an object",
			`null`:                               "null, not an object",
			`{"transactions":{"token":"t1"}}`:    `"transactions" is not an array`,
			`{"transactions":null}`:              `"transactions" is not an array`,
			`{}`:                                 "batch has no notifications",
			`{"transactions":[]}`:                "batch has no notifications",
			`{"":[{"token":"t1"}]}`:              "not a usable name",
			`{"a\u0000b":[{"token":"t1"}]}`:      "not a usable name",
			"{\"caf\xe9\":[{\"token\":\"t1\"}]}": "not a usable name",
			`{"` + strings.Repeat("c", maxKeyBytes+1) + `":[{"token":"t1"}]}`: "not a usable name",
			string(tooMany): "more than 1000 notifications",
		} {
			delivery, err := marqeta.Verify([]byte(body), marqetaDelivery(marqetaSecret, []byte(body)))
			require.NoError(t, err, "an authentic delivery is not an error: %q", body)
			event := requireOneEvent(t, delivery)
			require.ErrorContains(t, event.ParseError, contains, "%q", body)
			require.Equal(t, Event{ParseError: event.ParseError}, event, "no id: the receiver keys it by the body's SHA-256")
			require.Nil(t, delivery.Reply)
		}
	})

	t.Run("ExactlyTheItemLimitIsSplit", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		body := marqetaBody("transactions", slices.Repeat([]string{`{"token":"t"}`}, maxBatchItems)...)
		delivery, err := marqeta.Verify(body, marqetaDelivery(marqetaSecret, body))
		require.NoError(t, err)
		require.Len(t, delivery.Events, maxBatchItems)
	})

	t.Run("HugeBodyDoesNotPanic", func(t *testing.T) {
		t.Parallel()
		marqeta := newTestMarqeta(t, "", marqetaSecret)
		const size = hugeBodyBytes
		item := `{"token":"big","memo":"` + strings.Repeat("x", size) + `"}`
		for body, events := range map[string]int{
			string(marqetaBody("transactions", item, marqetaTransaction("t2"))): 2,
			strings.Repeat("x", size): 1,
			strings.Repeat("[", size): 1,
			`{"transactions":[` + strings.Repeat(`{"token":"t"},`, size/14) + `{}]}`: 1,
		} {
			delivery, err := marqeta.Verify([]byte(body), marqetaDelivery(marqetaSecret, []byte(body)))
			require.NoError(t, err)
			require.Len(t, delivery.Events, events)
		}
	})

	t.Run("AckIsExactly200", func(t *testing.T) {
		t.Parallel()
		var verifier Verifier = newTestMarqeta(t, "")
		ack, ok := verifier.(Acknowledger)
		require.True(t, ok)
		require.Equal(t, Reply{Status: http.StatusOK, ContentType: "application/json", Body: []byte(`{"new":9,"duplicates":1,"twins":0}`)},
			ack.Ack(inbox.ClaimCounts{New: 9, Duplicates: 1}))
	})

	t.Run("SignHeadersOutputVerifies", func(t *testing.T) {
		t.Parallel()
		body := []byte(marqetaVectorBody)
		for _, algorithm := range []string{"", "sha1", "sha256"} {
			config := &Config{Secrets: []string{"old", marqetaSecret}, BasicAuth: marqetaAuth, Algorithm: algorithm}
			header, err := SignHeaders(&SignParams{Provider: "marqeta", Secret: marqetaSecret, Body: body, Config: config})
			require.NoError(t, err)
			require.Equal(t, "application/json", header.Get("Content-Type"))
			verifier, err := New("marqeta", config)
			require.NoError(t, err)
			_, err = verifier.Verify(body, header)
			require.NoError(t, err, algorithm)
		}
		// Without a secret the signer sends Basic Auth alone, as Marqeta does
		// when no HMAC is configured.
		header, err := SignHeaders(&SignParams{Provider: "marqeta", Body: body, Config: &Config{BasicAuth: marqetaAuth}})
		require.NoError(t, err)
		require.Empty(t, header.Get("X-Marqeta-Signature"))
		_, err = newTestMarqeta(t, "").Verify(body, header)
		require.NoError(t, err)

		_, err = SignHeaders(&SignParams{Provider: "marqeta", Secret: marqetaSecret, Body: body})
		require.ErrorContains(t, err, "BasicAuth")
		_, err = SignHeaders(&SignParams{Provider: "marqeta", Secret: "s", Body: body, Config: &Config{BasicAuth: marqetaAuth, Algorithm: "md5"}})
		require.ErrorContains(t, err, "algorithm")
	})
}

// requireStorableEvents checks what the receiver relies on for every event
// of an authentic delivery: a payload is a jsonb-safe object taken verbatim
// from the body, and ids, types and parse errors are text PostgreSQL stores.
func requireStorableEvents(t *testing.T, body []byte, events []Event) {
	t.Helper()
	require.LessOrEqual(t, len(events), maxBatchItems)
	for _, event := range events {
		requireStorableKey(t, event.ID)
		requireStorableKey(t, event.Type)
		if event.ParseError != nil {
			require.Nil(t, event.Payload)
			message := event.ParseError.Error()
			require.True(t, utf8.ValidString(message) && !strings.ContainsRune(message, 0), "%q", message)
			continue
		}
		require.NotEmpty(t, event.ID)
		requireStorablePayload(t, event.Payload)
		require.True(t, bytes.Contains(body, event.Payload))
	}
}

// FuzzMarqetaVerify checks that Verify never panics, that every refusal
// wraps a sentinel without quoting a credential, and that whatever verifies
// carried the genuine credentials and signature and splits into storable
// events.
func FuzzMarqetaVerify(f *testing.F) {
	genuineAuth := marqetaHeader(marqetaUser, marqetaPassword, "").Get("Authorization")
	f.Add([]byte(marqetaVectorBody), marqetaGenuineSHA256, genuineAuth)
	f.Add([]byte(marqetaVectorBody), strings.ToUpper(marqetaGenuineSHA256), genuineAuth)
	f.Add([]byte(marqetaVectorBody), marqetaGenuineSHA256, "Basic Og==")
	ping := []byte(`{"pings":[{"token":"marqeta","payload":"healthcheck"}]}`)
	f.Add(ping, marqetaSign(marqetaSecret, ping), genuineAuth)
	for _, body := range []string{
		`{"transactions":[{"token":"a"},{"token":"a"},{"memo":"\u0000"}],"pings":[]}`, "", "{}", `{"x":[1,[2],{"token":"\ud800"}]}`,
	} {
		f.Add([]byte(body), marqetaSign(marqetaSecret, []byte(body)), genuineAuth)
	}
	marqeta := newTestMarqeta(f, "", marqetaSecret)

	f.Fuzz(func(t *testing.T, body []byte, signature, authorization string) {
		header := marqetaHeader("", "", signature)
		header.Set("Authorization", authorization)
		delivery, err := marqeta.Verify(body, header)
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), marqetaSecret)
			require.NotContains(t, err.Error(), marqetaPassword)
			return
		}
		require.Equal(t, marqetaSign(marqetaSecret, body), signature)
		require.Equal(t, marqetaUser+":"+marqetaPassword, basicAuthOf(t, header))
		if delivery.Reply != nil {
			require.Empty(t, delivery.Events)
			return
		}
		require.NotEmpty(t, delivery.Events)
		requireStorableEvents(t, body, delivery.Events)
	})
}

// basicAuthOf returns the "user:password" header carries.
func basicAuthOf(t *testing.T, header http.Header) string {
	t.Helper()
	user, password, ok := (&http.Request{Header: header}).BasicAuth()
	require.True(t, ok)
	return user + ":" + password
}

// FuzzMarqetaSplit checks the splitter alone: no panic, at most the item
// limit, a health check has no events, anything else has at least one, and
// every event is storable; an event without id is the only event.
func FuzzMarqetaSplit(f *testing.F) {
	for _, seed := range []string{
		marqetaVectorBody, `{"pings":[{"token":"marqeta"}]}`, `{"pings":[],"transactions":[{"token":"t"},{"token":"t"}]}`,
		`{"transactions":[{"token":"t1"},"x",{"token":""},{"token":"\u0000"}],"cardtransitions":[{"token":"c\ud800"}]}`,
		"{\"t\":[{\"token\":\"\xff\"}]}", `{"t":[[[[]]]],"u":{}}`, "", "[]", `{"\u0000":[]}`,
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		events, ping := splitMarqeta(body)
		if ping {
			require.Empty(t, events)
			return
		}
		require.NotEmpty(t, events)
		requireStorableEvents(t, body, events)
		for _, event := range events {
			if event.ID == "" {
				require.Len(t, events, 1)
				require.Error(t, event.ParseError)
			}
		}
	})
}

// A Marqeta batch becomes one event per notification; a body of pings
// alone is a health check, answered and never stored.
func ExampleNew_marqeta() {
	config := &Config{
		Secrets:   []string{"mq_hmac_secret"}, // optional at Marqeta; checked when set
		BasicAuth: []BasicAuth{{Username: "marqeta", Password: "Marqeta-Passw0rd-2026!"}},
	}
	verifier, err := New("marqeta", config)
	if err != nil {
		panic(err)
	}
	for _, body := range []string{
		`{"transactions":[{"token":"txn_1","type":"authorization"},{"token":"txn_2","type":"authorization.clearing"}]}`,
		`{"pings":[{"token":"marqeta","payload":"healthcheck"}]}`,
	} {
		header, err := SignHeaders(&SignParams{Provider: "marqeta", Secret: "mq_hmac_secret", Body: []byte(body), Config: config})
		if err != nil {
			panic(err)
		}
		delivery, err := verifier.Verify([]byte(body), header)
		if err != nil {
			panic(err)
		}
		for _, event := range delivery.Events {
			fmt.Println(event.ID, event.Type)
		}
		if delivery.Reply != nil {
			fmt.Println("health check answered with", delivery.Reply.Status)
		}
	}

	// Output:
	// transactions:txn_1 transactions
	// transactions:txn_2 transactions
	// health check answered with 200
}
