package inboxstore

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxKeyBytes bounds an event id or twin key. Both are indexed, and a
// PostgreSQL btree entry cannot exceed about 2.7 kB: a longer key would fail
// the claim, answer 503, and make the provider retry it forever.
const maxKeyBytes = 1024

// checkKey returns why s cannot be stored as an event id or twin key, or nil.
func checkKey(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case len(s) > maxKeyBytes:
		return fmt.Errorf("is %d bytes, more than %d", len(s), maxKeyBytes)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	case strings.ContainsRune(s, 0):
		return errors.New("contains NUL")
	}
	return nil
}

// cleanText makes s storable in a text column: invalid UTF-8 and NUL are
// replaced by U+FFFD and the result is cut to maxKeyBytes (on a rune
// boundary). It is for descriptive fields such as the event type, which are
// not keys and may be altered.
func cleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) && len(s) <= maxKeyBytes {
		return s
	}
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	for len(s) > maxKeyBytes {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
