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

// setBasicAuth sets header's Authorization to cred.
func setBasicAuth(header http.Header, cred BasicAuth) {
	req := http.Request{Header: header}
	req.SetBasicAuth(cred.Username, cred.Password)
}

// basicAuthHeader returns a header carrying the first Basic Auth pair of
// config, for the signers of providers that require Basic Auth.
func basicAuthHeader(provider string, config *Config) (http.Header, error) {
	if config == nil || len(config.BasicAuth) == 0 {
		return nil, fmt.Errorf("%s: signing needs SignParams.Config.BasicAuth", provider)
	}
	header := http.Header{}
	setBasicAuth(header, config.BasicAuth[0])
	return header, nil
}
