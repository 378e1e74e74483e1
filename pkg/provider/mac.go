package provider

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// This file holds what the HMAC schemes share: the keys of a source, the
// strict decoding of a signature, and the headers and timestamps around it.

// keyring holds a source's HMAC keys, any one of which may have signed a
// delivery (a secret rotates by configuring the old and the new one), and
// the hash they sign with.
type keyring struct {
	newHash func() hash.Hash
	// size is the length of a MAC of newHash.
	size int
	keys [][]byte
}

// newKeyring returns the keyring of secrets used as their bytes, as they
// are: how every provider but Adyen and Standard Webhooks keys its HMAC.
func newKeyring(newHash func() hash.Hash, secrets []string) keyring {
	k, _ := newDecodedKeyring(newHash, secrets, func(s string) ([]byte, error) { return []byte(s), nil })
	return k
}

// newDecodedKeyring returns the keyring of secrets decoded by decode (a
// base64 or hex key). An error names the secret by its index, never by its
// value.
func newDecodedKeyring(newHash func() hash.Hash, secrets []string, decode func(string) ([]byte, error)) (keyring, error) {
	k := keyring{newHash: newHash, size: newHash().Size(), keys: make([][]byte, len(secrets))}
	for i, secret := range secrets {
		key, err := decode(secret)
		if err != nil {
			return keyring{}, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		k.keys[i] = key
	}
	return k, nil
}

// matches reports whether any of macs is the HMAC of the concatenated parts
// under any key. Each comparison runs in constant time.
func (k keyring) matches(macs [][]byte, parts ...[]byte) bool {
	for _, key := range k.keys {
		expected := sign.MAC(k.newHash, key, parts...)
		for _, mac := range macs {
			if hmac.Equal(mac, expected) {
				return true
			}
		}
	}
	return false
}

// decodeHexMAC decodes a MAC of size bytes written as 2*size lowercase hex
// digits, the form every hex scheme sends. Upper case is refused, so that a
// signature has exactly one accepted spelling (hex.DecodeString takes both).
func decodeHexMAC(s string, size int) ([]byte, bool) {
	if len(s) != 2*size || strings.ContainsFunc(s, func(r rune) bool {
		return (r < '0' || r > '9') && (r < 'a' || r > 'f')
	}) {
		return nil, false
	}
	mac, err := hex.DecodeString(s)
	return mac, err == nil
}

// decodeBase64MAC decodes a MAC of size bytes written in padded standard
// base64, and only in its canonical spelling: Go's decoder skips newlines
// and ignores the unused low bits of the last character, so that several
// strings would otherwise decode to one MAC.
func decodeBase64MAC(s string, size int) ([]byte, bool) {
	if len(s) != base64.StdEncoding.EncodedLen(size) {
		return nil, false
	}
	mac, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(mac) != size || base64.StdEncoding.EncodeToString(mac) != s {
		return nil, false
	}
	return mac, true
}

// requiredHeader returns the value of header name, and an error wrapping
// ErrSignatureMissing when it is absent or empty.
func requiredHeader(header http.Header, name string) (string, error) {
	value := header.Get(name)
	if value == "" {
		return "", fmt.Errorf("no %s header: %w", name, ErrSignatureMissing)
	}
	return value, nil
}

// signedTimestamp reads the timestamp header name of a scheme that signs it
// on its own (Slack, Standard Webhooks, a templated hmac source): the value
// as sent, which is what was signed, and the instant it stands for. Its
// errors wrap ErrSignatureMissing for an absent or empty header and
// ErrSignatureInvalid for a value that is not canonical unix seconds.
func signedTimestamp(header http.Header, name string) (string, time.Time, error) {
	value, err := requiredHeader(header, name)
	if err != nil {
		return "", time.Time{}, err
	}
	signedAt, err := parseUnix(value)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: %w", name, err)
	}
	return value, signedAt, nil
}

// errTimestampMalformed is returned for a timestamp parseUnix refuses.
var errTimestampMalformed = fmt.Errorf("timestamp is not canonical unix seconds: %w", ErrSignatureInvalid)

// parseUnix parses a signed timestamp in unix seconds. Only the canonical
// decimal form is accepted (no sign, no leading zero, no spaces), so the
// string that was signed and the instant that is checked cannot disagree.
func parseUnix(s string) (time.Time, error) {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return time.Time{}, errTimestampMalformed
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, errTimestampMalformed
		}
	}
	secs, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, errTimestampMalformed
	}
	return time.Unix(secs, 0), nil
}

// checkTimestamp returns an error wrapping ErrTimestampOutsideTolerance when
// signedAt is more than tolerance before or after now. Callers check the
// signature first, so that it tells an unauthenticated caller nothing.
func checkTimestamp(now, signedAt time.Time, tolerance time.Duration) error {
	age := now.Sub(signedAt)
	if age > tolerance || age < -tolerance {
		return fmt.Errorf("timestamp %d differs from now by %s, tolerance %s: %w",
			signedAt.Unix(), age.Abs(), tolerance, ErrTimestampOutsideTolerance)
	}
	return nil
}
