package provider

import (
	"fmt"
	"net/http"
)

// Reverify verifies again a delivery the inbox stored: its raw body and the
// headers Verify kept with it (Delivery.Headers), with the named provider
// configured by config. It returns the index in config.Secrets of the secret
// that signed the delivery, or -1 when no one secret verifies it alone
// though the secrets together do (an Adyen batch whose items were signed
// with different keys). An error is Verify's, wrapping its sentinel, or
// says that config has no secret (a marqeta source without HMAC signs
// nothing that is stored).
//
// Timestamps are checked against config.Now with config.Tolerance: set Now
// to the time the delivery was received to ask what the receiver asked
// then, so that an old delivery does not fail for its age, or leave it nil
// to check against the current clock.
//
// Only what the stored bytes prove is checked: the signatures. Basic Auth
// and API keys authenticated the connection; they are never stored, so
// they are not checked (config.BasicAuth and config.HMAC's API keys are
// ignored).
func Reverify(name string, config *Config, body []byte, headers map[string]string) (int, error) {
	if config == nil {
		return -1, fmt.Errorf("provider %s: config is required", name)
	}
	if len(config.Secrets) == 0 {
		return -1, fmt.Errorf("%s: the source has no signing secret: nothing stored can be checked", name)
	}
	c := *config
	c.BasicAuth, c.signaturesOnly = nil, true
	if c.HMAC != nil {
		h := *c.HMAC
		h.APIKeyHeader, h.APIKeys = "", nil
		c.HMAC = &h
	}
	header := http.Header{}
	for name, value := range headers {
		header.Set(name, value)
	}
	verify := func(secrets []string) error {
		c := c
		c.Secrets = secrets
		verifier, err := New(name, &c)
		if err != nil {
			return err
		}
		_, err = verifier.Verify(body, header)
		return err
	}
	// The verdict is the source's, with every secret; then the secret that
	// gave it is found by trying each alone.
	if err := verify(c.Secrets); err != nil {
		return -1, err
	}
	for i, secret := range c.Secrets {
		if verify([]string{secret}) == nil {
			return i, nil
		}
	}
	return -1, nil
}
