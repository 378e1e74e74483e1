package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
)

// checkBasicAuth returns nil when header carries HTTP Basic credentials equal
// to one of accepted, compared in constant time, and an error wrapping
// ErrSignatureMissing or ErrSignatureInvalid otherwise. It is the Basic Auth
// half of composite checks (Marqeta, Adyen, hmac): every configured check
// must pass.
func checkBasicAuth(header http.Header, accepted []BasicAuth) error {
	req := http.Request{Header: header}
	user, pass, ok := req.BasicAuth()
	if !ok {
		return fmt.Errorf("no Basic Auth credentials: %w", ErrSignatureMissing)
	}
	userSum, passSum := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	matched := false
	for _, cred := range accepted {
		u := digestEqual(userSum, cred.Username)
		p := digestEqual(passSum, cred.Password)
		matched = (u && p) || matched
	}
	if !matched {
		return fmt.Errorf("Basic Auth credentials do not match: %w", ErrSignatureInvalid)
	}
	return nil
}

// digestEqual compares a presented credential's SHA-256 with an accepted
// credential's in constant time. Comparing digests rather than the values
// keeps the time independent of the accepted value's length.
func digestEqual(got [sha256.Size]byte, accepted string) bool {
	want := sha256.Sum256([]byte(accepted))
	return hmac.Equal(got[:], want[:])
}

// anyDigestEqual reports whether got equals one of accepted, looking at every
// one of them.
func anyDigestEqual(got [sha256.Size]byte, accepted [][sha256.Size]byte) bool {
	matched := false
	for _, a := range accepted {
		matched = hmac.Equal(got[:], a[:]) || matched
	}
	return matched
}

// CheckBasicAuth returns nil when header carries HTTP Basic credentials
// equal to one of accepted, compared in constant time (digests of the
// values, each accepted pair looked at), and an error wrapping
// ErrSignatureMissing or ErrSignatureInvalid otherwise. It is exported for
// the worker's River UI, which reuses the sources' comparison.
func CheckBasicAuth(header http.Header, accepted []BasicAuth) error {
	return checkBasicAuth(header, accepted)
}
