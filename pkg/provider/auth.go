package provider

import (
	"crypto/subtle"
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
	matched := 0
	for _, cred := range accepted {
		u := subtle.ConstantTimeCompare([]byte(user), []byte(cred.Username))
		p := subtle.ConstantTimeCompare([]byte(pass), []byte(cred.Password))
		matched |= u & p
	}
	if matched != 1 {
		return fmt.Errorf("Basic Auth credentials do not match: %w", ErrSignatureInvalid)
	}
	return nil
}
