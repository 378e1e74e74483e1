package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// Official vectors from /work/shared/providers.md §9: Adyen/adyen-go-api-library
// src/hmacvalidator/hmacvalidator_test.go (key, expectedSign and the
// notificationRequestItem of Test_Hmacvalidator; the raw string of "Encrypt
// correctly"). The item below carries that test's field values in JSON.
const (
	adyenVectorKey           = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenVectorSignature     = "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="
	adyenVectorSigningString = "pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true"
	adyenVectorItem          = `{"additionalData":{"hmacSignature":"` + adyenVectorSignature + `"},` +
		`"amount":{"currency":"EUR","value":1000},"eventCode":"EVENT","eventDate":"1970-01-01T00:00:00Z",` +
		`"merchantAccountCode":"merchantAccount","merchantReference":"reference","originalReference":"originalReference",` +
		`"paymentMethod":"VISA","pspReference":"pspReference","reason":"reason","success":"true"}`
	adyenVectorRawString = `countryCode:currencyCode:merchantAccount:merchantReference:paymentAmount:sessionValidity:skinCode:` +
		`NL:EUR:MagentoMerchantTest2:TEST-PAYMENT-2017-02-01-14\:02\:05:199:2017-02-02T14\:02\:05+01\:00:PKz2KML1`
	adyenVectorRawSignature = "34oR8T1whkQWTv9P+SzKyp8zhusf9n0dpqrm9nsqSJs="
)

// Keys and credentials of the tests' own deliveries.
const (
	adyenOldKey     = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	adyenNewKey     = adyenVectorKey
	adyenUnknownKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	adyenUser       = "ws_hookinbox@Company.Test"
	adyenPassword   = "adyen-basic-auth-password"
)

var adyenAuth = []BasicAuth{{Username: adyenUser, Password: adyenPassword}}

func newTestAdyen(t testing.TB, keys ...string) *adyenVerifier {
	t.Helper()
	adyen, err := newAdyenVerifier(&Config{Secrets: keys, BasicAuth: adyenAuth, Now: pinnedConfig(testNow).Now})
	require.NoError(t, err)
	return adyen
}

// adyenHeader carries the tests' Basic Auth credentials.
func adyenHeader() http.Header {
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(adyenUser, adyenPassword)
	return req.Header
}

// adyenBody wraps NotificationRequestItem objects in a notification.
func adyenBody(items ...string) []byte {
	wrapped := make([]string, len(items))
	for i, item := range items {
		wrapped[i] = `{"NotificationRequestItem":` + item + `}`
	}
	return []byte(`{"live":"false","notificationItems":[` + strings.Join(wrapped, ",") + `]}`)
}

// adyenTestItem is an AUTHORISATION-like item of the tests' own making.
type adyenTestItem struct {
	psp, eventCode string
	value          int
	// reason goes into the JSON as is, between quotes: raw bytes and escapes
	// reach the body untouched. It is not signed.
	reason string
}

// signing is the string the tests' own signer signs, written out by hand.
func (it adyenTestItem) signing() string {
	return it.psp + "::TestMerchant:order-" + it.psp + ":" + strconv.Itoa(it.value) + ":EUR:" + it.eventCode + ":true"
}

// json returns the item's JSON with signature as its hmacSignature.
func (it adyenTestItem) json(signature string) string {
	return `{"additionalData":{"authCode":"058705","hmacSignature":"` + signature + `"},` +
		`"amount":{"currency":"EUR","value":` + strconv.Itoa(it.value) + `},"eventCode":"` + it.eventCode + `",` +
		`"eventDate":"2026-11-29T10:00:00+01:00","merchantAccountCode":"TestMerchant","merchantReference":"order-` + it.psp + `",` +
		`"paymentMethod":"visa","pspReference":"` + it.psp + `","reason":"` + it.reason + `","success":"true"}`
}

// signed returns the item's JSON signed with hexKey by the tests' own HMAC.
func (it adyenTestItem) signed(hexKey string) string {
	return it.json(adyenReferenceSignature(hexKey, it.signing()))
}

// adyenReferenceSignature is the tests' own Adyen signature, independent of
// SignAdyenItem.
func adyenReferenceSignature(hexKey, signing string) string {
	key, err := hex.DecodeString(hexKey)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(referenceHMAC(key, []byte(signing)))
}

func authorisation(psp string) adyenTestItem {
	return adyenTestItem{psp: psp, eventCode: "AUTHORISATION", value: 1999, reason: "058705:1111:03/2030"}
}

func init() {
	registerConformance(adyenSigner)
}

// adyenSigner delivers batches of AUTHORISATION items whose pspReference is
// the event id, each signed inside the body by the tests' own HMAC; the
// suite adds the Basic Auth.
func adyenSigner() signer {
	return signer{
		provider:      "adyen",
		secrets:       [2]string{adyenOldKey, adyenNewKey},
		unknownSecret: adyenUnknownKey,
		body: func(ids ...string) []byte {
			items := make([]string, len(ids))
			for i, id := range ids {
				items[i] = adyenConformanceItem(id)
			}
			return adyenBody(items...)
		},
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			return request{body: adyenReferenceSignBody(t, secret, body)}
		},
		want: func(ids ...string) []Event {
			events := make([]Event, len(ids))
			for i, id := range ids {
				events[i] = Event{ID: "AUTHORISATION:" + id, Type: "AUTHORISATION"}
			}
			return events
		},
		signature:    func(r request) string { return adyenFirstSignature(r.body) },
		setSignature: adyenReplaceFirstSignature,
		decode:       base64.StdEncoding.DecodeString,
		encode:       base64.StdEncoding.EncodeToString,
		dropSignature: func(r request) []request {
			member := `"hmacSignature":"` + adyenFirstSignature(r.body) + `"`
			var out []request
			for _, change := range [][2]string{
				{"," + member, ""}, // absent
				{member, `"hmacSignature":""`},
				{member, `"hmacSignature":null`},
				{`"additionalData":{"authCode":"058705",` + member + `}`, `"additionalData":null`},
			} {
				dropped := r.clone()
				dropped.body = bytes.Replace(r.body, []byte(change[0]), []byte(change[1]), 1)
				out = append(out, dropped)
			}
			return out
		},
		wrongPrefixes: func(r request) []request {
			var out []request
			for _, prefix := range []string{"sha256=", "v1,", "HmacSHA256:", " "} {
				out = append(out, adyenReplaceFirstSignature(r, prefix+adyenFirstSignature(r.body)))
			}
			return out
		},
		tamper: func(body []byte) [][]byte {
			var out [][]byte
			for _, change := range [][2]string{ // every signed field, and signed fields of another type
				{`"pspReference":"`, `"pspReference":"x`},
				{`"merchantAccountCode":"TestMerchant"`, `"merchantAccountCode":"TestMerchant2"`},
				{`"merchantReference":"order-1"`, `"merchantReference":"order-2"`},
				{`"merchantReference":`, `"originalReference":"P0","merchantReference":`},
				{`"value":1999`, `"value":1998`},
				{`"value":1999`, `"value":"1999"`},
				{`"value":1999`, `"value":1999.0`},
				{`"currency":"EUR"`, `"currency":"USD"`},
				{`"eventCode":"AUTHORISATION"`, `"eventCode":"CAPTURE"`},
				{`"success":"true"`, `"success":"false"`},
				{`"success":"true"`, `"success":true`},
			} {
				out = append(out, bytes.Replace(body, []byte(change[0]), []byte(change[1]), 1))
			}
			return append(out, body[:len(body)-1]) // no longer JSON
		},
		basicAuth:  true,
		batch:      true,
		idFromBody: true,
		emptyBody:  ErrSignatureInvalid, // no item, so nothing is signed
	}
}

// adyenConformanceItem is an unsigned AUTHORISATION item whose pspReference,
// the only place its id appears, is id.
func adyenConformanceItem(id string) string {
	return `{"additionalData":{"authCode":"058705","hmacSignature":""},"amount":{"currency":"EUR","value":1999},` +
		`"eventCode":"AUTHORISATION","eventDate":"2026-11-29T10:00:00+01:00","merchantAccountCode":"TestMerchant",` +
		`"merchantReference":"order-1","paymentMethod":"visa","pspReference":"` + id + `","success":"true"}`
}

// adyenReferenceSignBody fills in each item's empty hmacSignature with the
// tests' own signature under hexKey, leaving every other byte as it is. A
// body without items is returned as it is.
func adyenReferenceSignBody(t *testing.T, hexKey string, body []byte) []byte {
	t.Helper()
	var envelope struct {
		NotificationItems []struct{ NotificationRequestItem json.RawMessage }
	}
	if json.Unmarshal(body, &envelope) != nil {
		return body
	}
	placeholder := []byte(`"hmacSignature":""`)
	signed, offset := bytes.Clone(body), 0
	for _, wrapper := range envelope.NotificationItems {
		dec := json.NewDecoder(bytes.NewReader(wrapper.NotificationRequestItem))
		dec.UseNumber()
		var item map[string]any
		require.NoError(t, dec.Decode(&item))
		signing, ok := adyenReferenceSigningString(item)
		require.True(t, ok)
		at := bytes.Index(signed[offset:], placeholder)
		require.GreaterOrEqual(t, at, 0, "an item has no empty hmacSignature to fill in")
		member := []byte(`"hmacSignature":"` + adyenReferenceSignature(hexKey, signing) + `"`)
		signed = slices.Concat(signed[:offset+at], member, signed[offset+at+len(placeholder):])
		offset += at + len(member)
	}
	return signed
}

// adyenFirstSignature returns the hmacSignature of a body's first item.
func adyenFirstSignature(body []byte) string {
	var envelope struct {
		NotificationItems []struct {
			NotificationRequestItem struct {
				AdditionalData struct{ HmacSignature string }
			}
		}
	}
	if json.Unmarshal(body, &envelope) != nil || len(envelope.NotificationItems) == 0 {
		return ""
	}
	return envelope.NotificationItems[0].NotificationRequestItem.AdditionalData.HmacSignature
}

// adyenReplaceFirstSignature returns a copy of r whose first item carries
// encoded, byte for byte, as its hmacSignature.
func adyenReplaceFirstSignature(r request, encoded string) request {
	out := r.clone()
	old := `"hmacSignature":"` + adyenFirstSignature(r.body) + `"`
	out.body = bytes.Replace(r.body, []byte(old), []byte(`"hmacSignature":"`+encoded+`"`), 1)
	return out
}

func TestAdyen(t *testing.T) {
	t.Parallel()

	t.Run("OfficialItemVectorVerifies", func(t *testing.T) {
		t.Parallel()
		body := adyenBody(adyenVectorItem)
		delivery, err := newTestAdyen(t, adyenVectorKey).Verify(body, adyenHeader())
		require.NoError(t, err)
		require.Equal(t, Event{ID: "EVENT:pspReference", Type: "EVENT", Payload: []byte(adyenVectorItem)}, requireOneEvent(t, delivery))
		require.Empty(t, delivery.Headers, "Authorization is never kept")
		require.Nil(t, delivery.Reply)
	})

	t.Run("SignAdyenItemReproducesTheOfficialItemVector", func(t *testing.T) {
		t.Parallel()
		item, err := readAdyenItem([]byte(adyenVectorItem))
		require.NoError(t, err)
		require.Equal(t, adyenVectorSigningString, item.signed)
		require.Equal(t, adyenVectorSignature, item.signature)
		for _, key := range []string{adyenVectorKey, strings.ToLower(adyenVectorKey)} {
			signature, err := sign.AdyenItem(key, []byte(adyenVectorItem))
			require.NoError(t, err)
			require.Equal(t, adyenVectorSignature, signature)
		}
		unsigned := strings.Replace(adyenVectorItem, adyenVectorSignature, "stale", 1)
		signature, err := sign.AdyenItem(adyenVectorKey, []byte(unsigned))
		require.NoError(t, err)
		require.Equal(t, adyenVectorSignature, signature, "an existing hmacSignature is not signed")
		require.Equal(t, adyenVectorSignature, adyenReferenceSignature(adyenVectorKey, adyenVectorSigningString))
	})

	t.Run("OfficialRawStringVectorSignsWithTheDecodedKey", func(t *testing.T) {
		t.Parallel()
		key, err := sign.AdyenKey(adyenVectorKey)
		require.NoError(t, err)
		require.Equal(t, adyenVectorRawSignature, base64.StdEncoding.EncodeToString(sign.MAC(sha256.New, key, []byte(adyenVectorRawString))))
	})

	t.Run("AbsentFieldsAreSignedAsEmptyStrings", func(t *testing.T) {
		t.Parallel()
		for item, signing := range map[string]string{
			`{"eventCode":"REPORT_AVAILABLE","pspReference":"psp_1","success":"true"}`:                 "psp_1::::::REPORT_AVAILABLE:true",
			`{"eventCode":"E","pspReference":"p","amount":null,"originalReference":null}`:              "p::::::E:",
			`{"eventCode":"E","pspReference":"p","amount":{"value":0}}`:                                "p::::0::E:",
			`{"eventCode":"E","pspReference":"p","amount":{"value":-15,"currency":"JPY"}}`:             "p::::-15:JPY:E:",
			`{"eventCode":"E","pspReference":"a:b","merchantReference":"\u00e9\/x","success":"false"}`: "a:b:::\u00e9/x:::E:false",
		} {
			parsed, err := readAdyenItem([]byte(item))
			require.NoError(t, err, item)
			require.Equal(t, signing, parsed.signed, item)
		}
	})

	t.Run("ConfigNeedsBasicAuthAndHexKeys", func(t *testing.T) {
		t.Parallel()
		for config, contains := range map[*Config]string{
			{Secrets: []string{adyenVectorKey}}: "basic_auth",
			{BasicAuth: adyenAuth}:              "secrets",
			{BasicAuth: adyenAuth, Secrets: []string{adyenVectorKey, "not-a-hex-key!"}}:     "secrets[1]: not a hex-encoded HMAC key",
			{BasicAuth: adyenAuth, Secrets: []string{adyenVectorKey[1:]}}:                   "secrets[0]: not a hex-encoded HMAC key",
			{BasicAuth: adyenAuth, Secrets: []string{"whsec_zzzzzzzzzzzzzzzzzzzzzzzzzzzz"}}: "secrets[0]",
		} {
			verifier, err := New("adyen", config)
			require.ErrorContains(t, err, contains)
			require.Nil(t, verifier)
			for _, secret := range config.Secrets {
				require.NotContains(t, err.Error(), secret)
			}
		}
	})

	t.Run("MissingBasicAuthIsMissing", func(t *testing.T) {
		t.Parallel()
		body := adyenBody(adyenVectorItem)
		for _, authorization := range []string{"", "Bearer " + adyenPassword, "Basic"} {
			header := http.Header{}
			if authorization != "" {
				header.Set("Authorization", authorization)
			}
			_, err := newTestAdyen(t, adyenVectorKey).Verify(body, header)
			requireRejected(t, err, ErrSignatureMissing, adyenPassword, adyenVectorKey)
		}
	})

	t.Run("WrongBasicAuthIsInvalidEvenWithGenuineItems", func(t *testing.T) {
		t.Parallel()
		body := adyenBody(adyenVectorItem)
		for _, pair := range [][2]string{{adyenUser, "wrong"}, {"wrong", adyenPassword}, {adyenUser, ""}, {adyenPassword, adyenUser}} {
			req := &http.Request{Header: http.Header{}}
			req.SetBasicAuth(pair[0], pair[1])
			_, err := newTestAdyen(t, adyenVectorKey).Verify(body, req.Header)
			requireRejected(t, err, ErrSignatureInvalid, adyenPassword, adyenVectorKey)
		}
	})

	t.Run("EitherBasicAuthPairVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		adyen, err := newAdyenVerifier(&Config{Secrets: []string{adyenVectorKey}, BasicAuth: []BasicAuth{{"old_user", "old_password"}, {adyenUser, adyenPassword}}})
		require.NoError(t, err)
		body := adyenBody(adyenVectorItem)
		for _, pair := range [][2]string{{"old_user", "old_password"}, {adyenUser, adyenPassword}} {
			req := &http.Request{Header: http.Header{}}
			req.SetBasicAuth(pair[0], pair[1])
			_, err := adyen.Verify(body, req.Header)
			require.NoError(t, err, pair[0])
		}
	})

	t.Run("EitherKeyVerifiesDuringRotation", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenOldKey, strings.ToLower(adyenNewKey))
		for _, key := range []string{adyenOldKey, adyenNewKey} {
			body := adyenBody(authorisation("psp_1").signed(key))
			_, err := adyen.Verify(body, adyenHeader())
			require.NoError(t, err, key)
		}
		// A delivery's items may even be signed with different keys.
		body := adyenBody(authorisation("psp_1").signed(adyenOldKey), authorisation("psp_2").signed(adyenNewKey))
		_, err := adyen.Verify(body, adyenHeader())
		require.NoError(t, err)
		_, err = newTestAdyen(t, adyenOldKey).Verify(adyenBody(authorisation("psp_1").signed(adyenNewKey)), adyenHeader())
		requireRejected(t, err, ErrSignatureInvalid, adyenOldKey, adyenNewKey)
	})

	t.Run("UnknownKeyIsInvalid", func(t *testing.T) {
		t.Parallel()
		_, err := newTestAdyen(t, adyenOldKey, adyenNewKey).Verify(adyenBody(authorisation("psp_1").signed(adyenUnknownKey)), adyenHeader())
		requireRejected(t, err, ErrSignatureInvalid, adyenOldKey, adyenNewKey, adyenUnknownKey)
	})

	t.Run("ItemWithoutHmacSignatureIsMissing", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		for _, item := range []string{
			`{"eventCode":"EVENT","pspReference":"pspReference"}`,
			`{"eventCode":"EVENT","pspReference":"pspReference","additionalData":null}`,
			`{"eventCode":"EVENT","pspReference":"pspReference","additionalData":{}}`,
			`{"eventCode":"EVENT","pspReference":"pspReference","additionalData":{"hmacSignature":""}}`,
			`{"eventCode":"EVENT","pspReference":"pspReference","additionalData":{"hmacSignature":null}}`,
			`{"eventCode":"EVENT","pspReference":"pspReference","additionalData":{"HmacSignature":"` + adyenVectorSignature + `"}}`,
		} {
			_, err := adyen.Verify(adyenBody(item), adyenHeader())
			requireRejected(t, err, ErrSignatureMissing, adyenVectorKey)
		}
	})

	t.Run("TamperedSignedFieldIsInvalid", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		for _, tampered := range []string{
			strings.Replace(adyenVectorItem, `"value":1000`, `"value":1001`, 1),
			strings.Replace(adyenVectorItem, `"value":1000`, `"value":100`, 1),
			strings.Replace(adyenVectorItem, `"currency":"EUR"`, `"currency":"USD"`, 1),
			strings.Replace(adyenVectorItem, `"success":"true"`, `"success":"false"`, 1),
			strings.Replace(adyenVectorItem, `"eventCode":"EVENT"`, `"eventCode":"REFUND"`, 1),
			strings.Replace(adyenVectorItem, `"pspReference":"pspReference"`, `"pspReference":"pspReferencf"`, 1),
			strings.Replace(adyenVectorItem, `"merchantReference":"reference"`, `"merchantReference":"reference "`, 1),
			strings.Replace(adyenVectorItem, `"originalReference":"originalReference",`, ``, 1),
			strings.Replace(adyenVectorItem, `"merchantAccountCode":"merchantAccount"`, `"merchantAccountCode":"MerchantAccount"`, 1),
			// Case matters: a key spelt otherwise is another (absent) member.
			strings.Replace(adyenVectorItem, `"pspReference":`, `"PspReference":`, 1),
		} {
			_, err := adyen.Verify(adyenBody(tampered), adyenHeader())
			requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		}
	})

	t.Run("UnsignedFieldsAreVouchedForByBasicAuthAlone", func(t *testing.T) {
		t.Parallel()
		// Adyen's HMAC covers eight fields; the rest can change without it
		// noticing. Documented on Adyen; Basic Auth is the other half.
		changed := strings.Replace(adyenVectorItem, `"reason":"reason"`, `"reason":"changed"`, 1)
		delivery, err := newTestAdyen(t, adyenVectorKey).Verify(adyenBody(changed), adyenHeader())
		require.NoError(t, err)
		require.Equal(t, []byte(changed), requireOneEvent(t, delivery).Payload)
	})

	t.Run("EverySingleBitFlipOfTheSignatureIsInvalid", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		mac, err := base64.StdEncoding.DecodeString(adyenVectorSignature)
		require.NoError(t, err)
		require.Len(t, mac, 32)
		for bit := range len(mac) * 8 {
			flipped := bytes.Clone(mac)
			flipped[bit/8] ^= 1 << (bit % 8)
			item := strings.Replace(adyenVectorItem, adyenVectorSignature, base64.StdEncoding.EncodeToString(flipped), 1)
			_, err := adyen.Verify(adyenBody(item), adyenHeader())
			requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		}
		for bit := range len(adyenVectorSignature) * 8 {
			flipped := []byte(adyenVectorSignature)
			flipped[bit/8] ^= 1 << (bit % 8)
			encoded, err := json.Marshal(string(flipped)) // keep the body JSON whatever the byte
			require.NoError(t, err)
			item := strings.Replace(adyenVectorItem, `"`+adyenVectorSignature+`"`, string(encoded), 1)
			_, err = adyen.Verify(adyenBody(item), adyenHeader())
			requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		}
	})

	t.Run("OtherSpellingsOfTheGenuineMACAreInvalid", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		mac, err := base64.StdEncoding.DecodeString(adyenVectorSignature)
		require.NoError(t, err)
		prefix := adyenVectorSignature[:len(adyenVectorSignature)-2] // "…tI"; 'c' carries 2 unused low bits
		for _, spelling := range []string{
			prefix + "d=", prefix + "e=", prefix + "f=", // decode to the same MAC in Go's lenient decoder
			adyenVectorSignature[:20] + `\n` + adyenVectorSignature[20:], adyenVectorSignature + `\r\n`,
			base64.RawStdEncoding.EncodeToString(mac), base64.URLEncoding.EncodeToString(mac),
			hex.EncodeToString(mac), " " + adyenVectorSignature,
		} {
			item := strings.Replace(adyenVectorItem, adyenVectorSignature, spelling, 1)
			_, err := adyen.Verify(adyenBody(item), adyenHeader())
			requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		}
	})

	t.Run("BatchOfTenWithADuplicateInsideGivesTenEventsInBodyOrder", func(t *testing.T) {
		t.Parallel()
		psps := []string{"P0", "P1", "P2", "P3", "P4", "P5", "P6", "P2", "P8", "P9"}
		items := make([]string, len(psps))
		for i, psp := range psps {
			items[i] = authorisation(psp).signed(adyenVectorKey)
		}
		delivery, err := newTestAdyen(t, adyenVectorKey).Verify(adyenBody(items...), adyenHeader())
		require.NoError(t, err)
		require.Len(t, delivery.Events, 10)
		for i, event := range delivery.Events {
			require.Equal(t, Event{ID: "AUTHORISATION:" + psps[i], Type: "AUTHORISATION", Payload: []byte(items[i])}, event)
		}
		require.Equal(t, delivery.Events[2].ID, delivery.Events[7].ID, "the inbox's claim skips the second")
	})

	t.Run("OneBadItemRejectsTheWholeDelivery", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		items := make([]string, 10)
		for i := range items {
			items[i] = authorisation("P" + strconv.Itoa(i)).signed(adyenVectorKey)
		}
		forged := slices.Clone(items)
		forged[6] = authorisation("P6").signed(adyenUnknownKey)
		_, err := adyen.Verify(adyenBody(forged...), adyenHeader())
		requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		require.ErrorContains(t, err, "item 6")

		tampered := slices.Clone(items)
		tampered[9] = strings.Replace(tampered[9], `"value":1999`, `"value":1`, 1)
		_, err = adyen.Verify(adyenBody(tampered...), adyenHeader())
		requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)

		unsigned := slices.Clone(items)
		unsigned[0] = authorisation("P0").json("")
		_, err = adyen.Verify(adyenBody(unsigned...), adyenHeader())
		requireRejected(t, err, ErrSignatureMissing, adyenVectorKey)
	})

	t.Run("UnstorableItemHasAParseErrorAndKeepsItsID", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		for reason, contains := range map[string]string{
			`a\u0000b`:     `\u0000`,
			"caf\xe9":      "not valid UTF-8",
			`\udc00`:       "low surrogate",
			"\xed\xa0\x80": "not valid UTF-8", // an encoded surrogate
		} {
			bad := adyenTestItem{psp: "P1", eventCode: "AUTHORISATION", value: 1999, reason: reason}.signed(adyenVectorKey)
			good := authorisation("P2").signed(adyenVectorKey)
			delivery, err := adyen.Verify(adyenBody(bad, good), adyenHeader())
			require.NoError(t, err, "%q", reason)
			require.Len(t, delivery.Events, 2)
			event := delivery.Events[0]
			require.ErrorContains(t, event.ParseError, contains, "%q", reason)
			require.ErrorContains(t, event.ParseError, "item 0")
			require.Equal(t, Event{ID: "AUTHORISATION:P1", Type: "AUTHORISATION", ParseError: event.ParseError}, event)
			require.Equal(t, Event{ID: "AUTHORISATION:P2", Type: "AUTHORISATION", Payload: []byte(good)}, delivery.Events[1])
		}
	})

	t.Run("ItemWithoutAUsableKeyHasAParseErrorAndAHashedID", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		for _, it := range []adyenTestItem{
			{psp: "", eventCode: "AUTHORISATION", value: 1},
			{psp: "P1", eventCode: "", value: 1},
			{psp: "P1", eventCode: `AUTH\u0000`, value: 1},
			{psp: strings.Repeat("P", maxKeyBytes+1), eventCode: "AUTHORISATION", value: 1},
		} {
			signing := strings.ReplaceAll(it.signing(), `\u0000`, "\x00")
			item := it.json(adyenReferenceSignature(adyenVectorKey, signing))
			delivery, err := adyen.Verify(adyenBody(item), adyenHeader())
			require.NoError(t, err, item)
			event := requireOneEvent(t, delivery)
			require.Equal(t, hashedID("", []byte(item)), event.ID)
			require.Error(t, event.ParseError)
			require.Nil(t, event.Payload)
			if !strings.Contains(item, `\u0000`) {
				require.ErrorContains(t, event.ParseError, "no event id: item 0 has no usable eventCode and pspReference")
			}
			if it.eventCode == "AUTHORISATION" {
				require.Equal(t, "AUTHORISATION", event.Type)
			} else {
				require.Empty(t, event.Type)
			}
		}
	})

	t.Run("UnreadableBodyIsInvalid", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		tooMany := make([]string, maxBatchItems+1)
		for i := range tooMany {
			tooMany[i] = adyenVectorItem
		}
		for _, body := range []string{
			"", " ", "not json", "null", "[]", `"x"`, "{}", `{"notificationItems":null}`, `{"notificationItems":{}}`,
			`{"notificationItems":[]}`, `{"NotificationItems":[{"NotificationRequestItem":` + adyenVectorItem + `}]}`,
			`{"notificationItems":[1]}`, `{"notificationItems":[{}]}`, `{"notificationItems":[{"NotificationRequestItem":null}]}`,
			`{"notificationItems":[{"NotificationRequestItem":[]}]}`, `{"notificationItems":[{"notificationRequestItem":` + adyenVectorItem + `}]}`,
			string(adyenBody(adyenVectorItem)) + "x",
			string(adyenBody(adyenVectorItem))[:50],
			string(adyenBody(tooMany...)),
		} {
			_, err := adyen.Verify([]byte(body), adyenHeader())
			requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		}
	})

	t.Run("SignedFieldOfTheWrongTypeIsInvalid", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		for _, change := range [][2]string{
			{`"value":1000`, `"value":"1000"`}, {`"value":1000`, `"value":1000.0`}, {`"value":1000`, `"value":1e3`},
			{`"value":1000`, `"value":99999999999999999999`},
			{`"amount":{"currency":"EUR","value":1000}`, `"amount":[{"currency":"EUR","value":1000}]`},
			{`"amount":{"currency":"EUR","value":1000}`, `"amount":"EUR 10.00"`},
			{`"success":"true"`, `"success":true`}, {`"pspReference":"pspReference"`, `"pspReference":42`},
			{`"currency":"EUR"`, `"currency":["EUR"]`},
			{`"additionalData":{"hmacSignature":"` + adyenVectorSignature + `"}`, `"additionalData":[{"hmacSignature":"` + adyenVectorSignature + `"}]`},
			{`"hmacSignature":"` + adyenVectorSignature + `"`, `"hmacSignature":["` + adyenVectorSignature + `"]`},
		} {
			item := strings.Replace(adyenVectorItem, change[0], change[1], 1)
			require.NotEqual(t, adyenVectorItem, item)
			require.True(t, json.Valid([]byte(item)), item)
			_, err := adyen.Verify(adyenBody(item), adyenHeader())
			requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		}
	})

	t.Run("ExactlyTheItemLimitIsSplit", func(t *testing.T) {
		t.Parallel()
		items := make([]string, maxBatchItems)
		for i := range items {
			items[i] = adyenVectorItem
		}
		delivery, err := newTestAdyen(t, adyenVectorKey).Verify(adyenBody(items...), adyenHeader())
		require.NoError(t, err)
		require.Len(t, delivery.Events, maxBatchItems)
	})

	t.Run("HugeBodyDoesNotPanic", func(t *testing.T) {
		t.Parallel()
		adyen := newTestAdyen(t, adyenVectorKey)
		const size = hugeBodyBytes
		big := adyenTestItem{psp: "P1", eventCode: "AUTHORISATION", value: 1, reason: strings.Repeat("x", size)}.signed(adyenVectorKey)
		delivery, err := adyen.Verify(adyenBody(big), adyenHeader())
		require.NoError(t, err)
		require.Equal(t, "AUTHORISATION:P1", requireOneEvent(t, delivery).ID)
		for _, body := range []string{
			strings.Repeat("x", size), strings.Repeat("[", size),
			string(adyenBody(slices.Repeat([]string{`{}`}, size/30)...)),
		} {
			_, err := adyen.Verify([]byte(body), adyenHeader())
			requireRejected(t, err, ErrSignatureInvalid, adyenVectorKey)
		}
	})

	t.Run("AckIsAccepted", func(t *testing.T) {
		t.Parallel()
		var verifier Verifier = newTestAdyen(t, adyenVectorKey)
		ack, ok := verifier.(Acknowledger)
		require.True(t, ok)
		require.Equal(t, Reply{Status: http.StatusOK, ContentType: "text/plain", Body: []byte("[accepted]")},
			ack.Ack(inbox.ClaimCounts{New: 9, Duplicates: 1}))
	})

	t.Run("SignAdyenBodySignsEveryItem", func(t *testing.T) {
		t.Parallel()
		body := adyenBody(
			`{"eventCode":"AUTHORISATION","pspReference":"P1","amount":{"value":1,"currency":"EUR"},"success":"true"}`,
			`{"eventCode":"REFUND","pspReference":"P2","additionalData":{"hmacSignature":"stale","authCode":"1"}}`,
			`{"eventCode":"CAPTURE","pspReference":"P3","additionalData":null,"note":"<&>"}`,
		)
		_, err := newTestAdyen(t, adyenOldKey).Verify(body, adyenHeader())
		requireRejected(t, err, ErrSignatureMissing, adyenOldKey)

		signed, err := sign.AdyenBody(adyenOldKey, body)
		require.NoError(t, err)
		delivery, err := newTestAdyen(t, adyenOldKey).Verify(signed, adyenHeader())
		require.NoError(t, err)
		require.Len(t, delivery.Events, 3)
		for i, id := range []string{"AUTHORISATION:P1", "REFUND:P2", "CAPTURE:P3"} {
			require.Equal(t, id, delivery.Events[i].ID)
			require.NoError(t, delivery.Events[i].ParseError)
		}
		require.Contains(t, string(delivery.Events[1].Payload), `"authCode":"1"`)
		_, err = newTestAdyen(t, adyenNewKey).Verify(signed, adyenHeader())
		requireRejected(t, err, ErrSignatureInvalid, adyenOldKey, adyenNewKey)

		for _, bad := range []string{"", "[]", `{"notificationItems":[{"NotificationRequestItem":{"additionalData":1}}]}`} {
			_, err := sign.AdyenBody(adyenOldKey, []byte(bad))
			require.Error(t, err, bad)
		}
		_, err = sign.AdyenBody("xyz", body)
		require.ErrorContains(t, err, "not a hex-encoded HMAC key")
	})

	t.Run("SignHeadersAddsBasicAuthToASignedBody", func(t *testing.T) {
		t.Parallel()
		config := &Config{Secrets: []string{adyenOldKey}, BasicAuth: adyenAuth}
		body, err := sign.AdyenBody(adyenOldKey, adyenBody(authorisation("P1").json("")))
		require.NoError(t, err)
		header, err := SignHeaders(&SignParams{Provider: "adyen", Secret: adyenOldKey, Body: body, Config: config})
		require.NoError(t, err)
		require.Equal(t, adyenUser+":"+adyenPassword, basicAuthOf(t, header))
		verifier, err := New("adyen", config)
		require.NoError(t, err)
		_, err = verifier.Verify(body, header)
		require.NoError(t, err)

		_, err = SignHeaders(&SignParams{Provider: "adyen", Secret: adyenOldKey, Body: body})
		require.ErrorContains(t, err, "BasicAuth")
	})
}

// adyenReferenceSigningString computes an item's signing string with
// encoding/json's generic decoding, independently of adyenSigningString, or
// reports false when a signed field has a type Adyen never sends.
func adyenReferenceSigningString(item map[string]any) (string, bool) {
	str := func(object map[string]any, name string) (string, bool) {
		switch v := object[name].(type) {
		case nil:
			return "", true
		case string:
			return v, true
		}
		return "", false
	}
	amount, ok := item["amount"].(map[string]any)
	if !ok && item["amount"] != nil {
		return "", false
	}
	value := ""
	switch v := amount["value"].(type) {
	case nil:
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return "", false
		}
		value = strconv.FormatInt(n, 10)
	default:
		return "", false
	}
	fields := []string{}
	for _, f := range []struct {
		object map[string]any
		name   string
	}{{item, "pspReference"}, {item, "originalReference"}, {item, "merchantAccountCode"}, {item, "merchantReference"}} {
		s, ok := str(f.object, f.name)
		if !ok {
			return "", false
		}
		fields = append(fields, s)
	}
	currency, ok1 := str(amount, "currency")
	eventCode, ok2 := str(item, "eventCode")
	success, ok3 := str(item, "success")
	if !ok1 || !ok2 || !ok3 {
		return "", false
	}
	return strings.Join(append(fields, value, currency, eventCode, success), ":"), true
}

// FuzzAdyenVerify checks that Verify never panics, that every refusal wraps
// a sentinel without quoting the key or password, and that whatever
// verifies had every item signed with the key, as the tests' own decoding
// and HMAC compute it, and splits into storable events.
func FuzzAdyenVerify(f *testing.F) {
	f.Add(adyenBody(adyenVectorItem))
	f.Add(adyenBody(adyenVectorItem, adyenVectorItem, strings.Replace(adyenVectorItem, `"reason"`, `"x":"\u0000","reason"`, 1)))
	f.Add(adyenBody(authorisation("P1").signed(adyenVectorKey), adyenTestItem{psp: "P2", eventCode: "E", reason: "\xff"}.signed(adyenVectorKey)))
	f.Add(adyenBody(adyenTestItem{psp: "", eventCode: "", value: 0}.signed(adyenVectorKey)))
	f.Add(adyenBody(`{"eventCode":"E","pspReference":"p","additionalData":{"hmacSignature":"x"}}`))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{}}]}`))
	f.Add([]byte{})
	adyen := newTestAdyen(f, adyenVectorKey)

	f.Fuzz(func(t *testing.T, body []byte) {
		delivery, err := adyen.Verify(body, adyenHeader())
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), adyenVectorKey)
			require.NotContains(t, err.Error(), adyenPassword)
			return
		}
		var envelope map[string]json.RawMessage
		var wrappers []map[string]json.RawMessage // encoding/json matches struct fields case-insensitively
		require.NoError(t, json.Unmarshal(body, &envelope))
		require.NoError(t, json.Unmarshal(envelope["notificationItems"], &wrappers))
		require.Len(t, delivery.Events, len(wrappers))
		for _, wrapper := range wrappers {
			dec := json.NewDecoder(bytes.NewReader(wrapper["NotificationRequestItem"]))
			dec.UseNumber()
			var item map[string]any
			require.NoError(t, dec.Decode(&item))
			signing, ok := adyenReferenceSigningString(item)
			require.True(t, ok)
			additional, _ := item["additionalData"].(map[string]any)
			require.Equal(t, adyenReferenceSignature(adyenVectorKey, signing), additional["hmacSignature"])
		}
		requireStorableEvents(t, body, delivery.Events)
	})
}

// FuzzAdyenSplit checks the item reader alone: no panic, refusals wrap
// ErrSignatureInvalid, at most the item limit, and every item's event is
// storable whatever its signature.
func FuzzAdyenSplit(f *testing.F) {
	for _, seed := range []string{
		string(adyenBody(adyenVectorItem)), `{"notificationItems":[{"NotificationRequestItem":{"amount":{"value":-0}}}]}`,
		`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"\ud800","eventCode":"\u0000"}}]}`,
		"{\"notificationItems\":[{\"NotificationRequestItem\":{\"reason\":\"\xff\"}}]}", `{"notificationItems":[[],{}]}`, "", "null",
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := splitAdyen(body)
		if err != nil {
			require.ErrorIs(t, err, ErrSignatureInvalid)
			require.Nil(t, items)
			return
		}
		require.NotEmpty(t, items)
		events := make([]Event, len(items))
		for i, item := range items {
			require.Equal(t, 7, strings.Count(item.signed, ":")-adyenColonsInFields(item.members))
			events[i] = item.event(i)
		}
		requireStorableEvents(t, body, events)
	})
}

// adyenColonsInFields counts the colons inside an item's signed string
// fields, so that the signing string's separators can be counted.
func adyenColonsInFields(members map[string]json.RawMessage) int {
	n := 0
	for _, name := range []string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference", "eventCode", "success"} {
		s, _ := optionalString(members, name)
		n += strings.Count(s, ":")
	}
	var amount map[string]json.RawMessage
	_ = json.Unmarshal(members["amount"], &amount)
	s, _ := optionalString(amount, "currency")
	return n + strings.Count(s, ":")
}

// Adyen signs each item inside the body, so a demo or test signs the body
// first with sign.AdyenBody, then lets webhook.Headers add the Basic Auth that
// Adyen's endpoint settings configure.
func ExampleNew_adyen() {
	const hexKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	config := &Config{Secrets: []string{hexKey}, BasicAuth: []BasicAuth{{Username: "ws@Company.Test", Password: "s3cret"}}}
	body, err := sign.AdyenBody(hexKey, []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":`+
		`{"eventCode":"AUTHORISATION","pspReference":"QFQTPCQ8HXSKGK82","amount":{"currency":"EUR","value":1000},`+
		`"merchantAccountCode":"TestMerchant","merchantReference":"order-1","success":"true"}}]}`))
	if err != nil {
		panic(err)
	}
	header, err := SignHeaders(&SignParams{Provider: "adyen", Body: body, Config: config})
	if err != nil {
		panic(err)
	}

	verifier, err := New("adyen", config)
	if err != nil {
		panic(err)
	}
	delivery, err := verifier.Verify(body, header)
	if err != nil {
		panic(err)
	}
	fmt.Println(delivery.Events[0].ID, delivery.Events[0].Type)
	fmt.Println(string(verifier.(Acknowledger).Ack(inbox.ClaimCounts{New: 1}).Body))

	// Output:
	// AUTHORISATION:QFQTPCQ8HXSKGK82 AUTHORISATION
	// [accepted]
}
