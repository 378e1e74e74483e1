package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestParsePayload(t *testing.T) {
	t.Parallel()

	t.Run("StorableObjectsParse", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{
			`{}`,
			` {"id":"evt_1"} `,
			`{"a":"\\u0000"}`,            // a backslash, then the text u0000
			`{"a":"\\\\u0000"}`,          // two backslashes, then the text
			`{"a":"\"\\u0000\""}`,        // escaped quotes around the text
			`{"a":"\ud83d\ude00"}`,       // a surrogate pair
			`{"a":"\uD83D\uDE00\u00e9"}`, // upper case hex
			`{"a":"\u0001\u001f\uffff"}`,
			`{"\\u0000":"k"}`,
			`{"a":[1,2.5e3,true,null,{"b":"é"}]}`,
		} {
			p := parsePayload([]byte(body))
			require.NoError(t, p.err, body)
		}
	})

	t.Run("UnstorableStringsAreRefused", func(t *testing.T) {
		t.Parallel()
		for body, contains := range map[string]string{
			`{"a":"\u0000"}`:             `\u0000`,
			`{"\u0000":1}`:               `\u0000`,
			`{"a":"x\\\u0000"}`:          `\u0000`,
			`{"a":"\\\\\u0000"}`:         `\u0000`,
			`{"a":["ok","\u0000"]}`:      `\u0000`,
			`{"a":"\ud800"}`:             "high surrogate",
			`{"a":"\uDBFF\u0041"}`:       "high surrogate",
			`{"a":"\ud800\\udc00"}`:      "high surrogate",
			`{"a":"\udc00"}`:             "low surrogate",
			`{"a":"\ud83d\ude00\ude00"}`: "low surrogate",
		} {
			require.ErrorContains(t, parsePayload([]byte(body)).err, contains, body)
		}
	})

	t.Run("StrReadsOnlyTopLevelStrings", func(t *testing.T) {
		t.Parallel()
		p := parsePayload([]byte(`{"id":"evt_\u00e9","n":1,"o":{"id":"x"},"e":""}`))
		require.NoError(t, p.err)
		require.Equal(t, "evt_é", p.str("id"))
		require.Empty(t, p.str("n"))
		require.Empty(t, p.str("o"))
		require.Empty(t, p.str("e"))
		require.Empty(t, p.str("missing"))
		require.Empty(t, parsePayload([]byte("[]")).str("id"))
	})
}

// FuzzParsePayload checks parsePayload against encoding/json: whatever it
// accepts is a UTF-8 JSON object with no NUL in any key or value, and
// whatever has a NUL is refused.
func TestStorableKey(t *testing.T) {
	t.Parallel()

	t.Run("TextUpToTheLimitIsKept", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"", "evt_1", "caf\u00e9", "é\U0001F600", strings.Repeat("k", maxKeyBytes)} {
			require.Equal(t, s, storableKey(s))
		}
	})

	t.Run("WhatPostgreSQLRefusesOrIndexesBadlyIsNone", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"evt\xff", "\xed\xa0\x80", "evt\x00", strings.Repeat("k", maxKeyBytes+1), strings.Repeat("é", maxKeyBytes/2+1)} {
			require.Empty(t, storableKey(s), "%q", s)
		}
	})
}

func TestItemID(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"token":"t1"}`)

	t.Run("AUsableKeyIsTheID", func(t *testing.T) {
		t.Parallel()
		id, keyed := itemID("transactions:", "t1", raw)
		require.True(t, keyed)
		require.Equal(t, "transactions:t1", id)
	})

	t.Run("OtherwiseTheItemsHashIsTheID", func(t *testing.T) {
		t.Parallel()
		for key, raw := range map[string][]byte{
			"":                               []byte(`{"amount":1}`),
			"t\x00":                          raw,
			strings.Repeat("t", maxKeyBytes): raw,                              // the prefix makes it too long
			"t\ufffd1":                       []byte("{\"token\":\"t\xff1\"}"), // decoded through U+FFFD
		} {
			id, keyed := itemID("transactions:", key, raw)
			require.False(t, keyed, "%q", key)
			require.Equal(t, hashedID("transactions:", raw), id)
			require.Equal(t, id, storableKey(id))
		}
	})
}

// hashedID is the id itemID gives an item without a usable key, computed
// by the tests' own means.
func hashedID(prefix string, raw []byte) string {
	sum := sha256.Sum256(raw)
	return prefix + "sha256:" + hex.EncodeToString(sum[:])
}

func FuzzParsePayload(f *testing.F) {
	for _, seed := range []string{
		`{"a":"\u0000"}`, `{"a":"\\u0000"}`, `{"\ud83d\ude00":"\ud800"}`, `[]`, `{"a":[{"b":"\u0000"}]}`, "",
		`{"a":"\"\\\"\u0000"}`,
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		p := parsePayload(body)
		var decoded any
		hasNUL := json.Unmarshal(body, &decoded) == nil && containsNUL(decoded)
		if hasNUL {
			require.Error(t, p.err)
		}
		if p.err != nil {
			require.Nil(t, p.members)
			return
		}
		require.True(t, utf8.Valid(body))
		require.IsType(t, map[string]any{}, decoded)
		require.False(t, hasNUL)
	})
}

// containsNUL reports whether a decoded JSON value has a NUL in a key or a
// string.
func containsNUL(value any) bool {
	switch value := value.(type) {
	case string:
		return strings.ContainsRune(value, 0)
	case []any:
		for _, item := range value {
			if containsNUL(item) {
				return true
			}
		}
	case map[string]any:
		for key, item := range value {
			if strings.ContainsRune(key, 0) || containsNUL(item) {
				return true
			}
		}
	}
	return false
}
