package sign

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"slices"
	"strings"
)

// MAC returns the HMAC of the concatenated parts under key.
func MAC(newHash func() hash.Hash, key []byte, parts ...[]byte) []byte {
	mac := hmac.New(newHash, key)
	for _, part := range parts {
		mac.Write(part)
	}
	return mac.Sum(nil)
}

// macSHA256 returns the HMAC-SHA256 of the concatenated parts under key.
func macSHA256(key []byte, parts ...[]byte) []byte {
	return MAC(sha256.New, key, parts...)
}

// hashes are the hashes a source may choose by name (Config.Algorithm).
var hashes = map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}

// HashNamed returns the hash a provider.Config.Algorithm value names among
// those a provider offers; "" means sha256.
func HashNamed(algorithm string, offered ...string) (func() hash.Hash, error) {
	name := cmp.Or(algorithm, "sha256")
	if !slices.Contains(offered, name) {
		last := len(offered) - 1
		return nil, fmt.Errorf("algorithm: %q is not %s or %s", algorithm, strings.Join(offered[:last], ", "), offered[last])
	}
	return hashes[name], nil
}
