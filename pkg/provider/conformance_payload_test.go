package provider

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// testConformanceParseErrors checks that an authentic delivery whose body
// cannot be stored is never an error: it yields one event with a
// ParseError. It runs for providers with one JSON event per delivery;
// batching and form providers test their own splitting.
func testConformanceParseErrors(t *testing.T, s signer) {
	if s.batch || s.formBody {
		t.Run("JSONParseErrors", func(t *testing.T) {
			t.Parallel()
			t.Skip("the provider's body is not one JSON event")
		})
		return
	}
	// knownID is the event id a delivery of id evt_1 keeps when its body
	// cannot be parsed: known unless the id lives in the body.
	knownID := "evt_1"
	if s.idFromBody {
		knownID = ""
	}

	requireParseError := func(t *testing.T, body []byte, contains string) {
		t.Helper()
		bundle := setupConformance(t, s)
		r := s.deliver(t, s.secrets[0], testNow, "evt_1", body)
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err, "an authentic delivery is not an error: %q", body)
		event := requireOneEvent(t, delivery)
		require.ErrorContains(t, event.ParseError, contains, "%q", body)
		require.Nil(t, event.Payload)
		require.Equal(t, knownID, event.ID)
	}

	t.Run("WhitespaceBodyIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		requireParseError(t, []byte(" \r\n\t"), "body is empty")
	})

	t.Run("NonUTF8BodyIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{
			"{\"id\":\"evt_1\",\"type\":\"caf\xe9\"}", // Latin-1
			"{\"id\":\"evt_1\",\"type\":\"\xff\xfe\"}",
			"{\"id\":\"evt_1\",\"type\":\"\xed\xa0\x80\"}", // an encoded surrogate
			"\xef\xbb\xbf{\"id\":\"evt_1\"}\xc0",
		} {
			requireParseError(t, []byte(body), "not valid UTF-8")
		}
	})

	t.Run("NULInAJSONStringIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{
			`{"id":"evt_1","type":"order\u0000created"}`,
			`{"id":"evt_1","data":{"\u0000":1}}`,
			`{"id":"evt_1","data":[["x", "\\\u0000"]]}`,
		} {
			requireParseError(t, []byte(body), `\u0000`)
		}
		requireParseError(t, withMember(s.body("evt_1"), `"note":"\u0000"`), `\u0000`)
	})

	t.Run("LoneSurrogateEscapeIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{
			`{"id":"evt_1","type":"\ud800"}`,
			`{"id":"evt_1","type":"\uDC00\uD800"}`,
			`{"id":"evt_1","type":"\ud800\ud800\udc00"}`,
			`{"id":"evt_1","type":"\ud800x"}`,
		} {
			requireParseError(t, []byte(body), "surrogate")
		}
		requireParseError(t, withMember(s.body("evt_1"), `"note":"\udfff"`), "surrogate")
	})

	t.Run("BodyThatIsNotAJSONObjectIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		for body, contains := range map[string]string{
			`[{"id":"evt_1"}]`:  "array, not an object",
			`"evt_1"`:           "string, not an object",
			`42`:                "number, not an object",
			`null`:              "null, not an object",
			`id=evt_1&type=x`:   "not JSON",
			`{"id":"evt_1"`:     "not JSON",
			`{"id":"evt_1"} {}`: "not JSON",
			"\xef\xbb\xbf{}":    "not JSON", // a byte order mark
			`<xml id="evt_1"/>`: "not JSON",
			`{"id":"evt_1",}`:   "not JSON",
			`{'id':'evt_1'}`:    "not JSON",
		} {
			requireParseError(t, []byte(body), contains)
		}
	})

	t.Run("MissingIDIsAuthenticWithParseError", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		r := s.deliver(t, s.secrets[0], testNow, "", s.body(""))
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		event := requireOneEvent(t, delivery)
		require.ErrorContains(t, event.ParseError, "no event id")
		require.Equal(t, Event{Type: s.want("")[0].Type, ParseError: event.ParseError}, event)
	})

	t.Run("EscapedBackslashBeforeU0000IsNotANUL", func(t *testing.T) {
		t.Parallel()
		bundle := setupConformance(t, s)
		body := withMember(s.body("evt_1"), `"note":"C:\\u0000 \ud83d\ude00 \" \\"`)
		r := s.deliver(t, s.secrets[0], testNow, "evt_1", body)
		delivery, err := bundle.verifier.Verify(r.body, r.header)
		require.NoError(t, err)
		s.requireEvents(t, delivery, r, "evt_1")
	})
}

// withMember returns the JSON object body with member ("name":value) added
// first.
func withMember(body []byte, member string) []byte {
	rest, ok := bytes.CutPrefix(body, []byte("{"))
	if !ok {
		panic("withMember: body is not a JSON object")
	}
	return append([]byte("{"+member+","), rest...)
}
