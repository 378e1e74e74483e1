package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// This file builds an HMAC verifier from its HMACConfig, checking that the
// settings make sense together.

// newHMAC builds the verifier; its errors name the config key at fault.
func newHMAC(config *Config) (*hmacVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, err
	}
	hc := config.HMAC
	if hc == nil || hc.Header == "" {
		return nil, errors.New("hmac.header is required: the header that carries the signature")
	}
	config = config.withDefaults()
	newHash, err := sign.HashNamed(config.Algorithm, "sha1", "sha256", "sha512")
	if err != nil {
		return nil, err
	}
	v := &hmacVerifier{
		keys:   newKeyring(newHash, config.Secrets),
		header: hc.Header, prefix: hc.Prefix, timestampHeader: hc.TimestampHeader,
		idHeader: hc.IDHeader, typeHeader: hc.TypeHeader, apiKeyHeader: hc.APIKeyHeader,
		basicAuth: config.BasicAuth, tolerance: config.Tolerance, now: config.Now,
	}
	switch hc.Encoding {
	case "", "hex":
	case "base64":
		v.base64 = true
	default:
		return nil, fmt.Errorf("hmac.encoding %q is not hex or base64", hc.Encoding)
	}
	if v.template, err = sign.ParseTemplate(hc.Template); err != nil {
		return nil, err
	}
	if err := errors.Join(v.checkTemplateFields(hc), v.parsePaths(hc), v.parseCredentials(hc)); err != nil {
		return nil, err
	}
	return v, nil
}

// checkTemplateFields checks that the headers a template signs are
// configured, and that a timestamp header is signed.
func (v *hmacVerifier) checkTemplateFields(hc *HMACConfig) error {
	switch {
	case v.template.Uses("timestamp") && hc.TimestampHeader == "":
		return errors.New("hmac.timestamp_header is required when hmac.template has {timestamp}")
	case !v.template.Uses("timestamp") && hc.TimestampHeader != "":
		return errors.New("hmac.timestamp_header is set but hmac.template has no {timestamp}: an unsigned timestamp proves nothing")
	case v.template.Uses("id") && hc.IDHeader == "":
		return errors.New("hmac.id_header is required when hmac.template has {id} (an id in the body is signed by {body})")
	}
	return nil
}

// parsePaths checks where the id and type come from and splits the paths.
func (v *hmacVerifier) parsePaths(hc *HMACConfig) error {
	switch {
	case hc.IDHeader == "" && hc.IDPath == "":
		return errors.New("hmac.id_header or hmac.id_path is required: the inbox deduplicates on the event id")
	case hc.IDHeader != "" && hc.IDPath != "":
		return errors.New("set one of hmac.id_header and hmac.id_path, not both")
	case hc.TypeHeader != "" && hc.TypePath != "":
		return errors.New("set one of hmac.type_header and hmac.type_path, not both")
	}
	var errs []error
	split := func(key, path string) []string {
		if path == "" {
			return nil
		}
		names := strings.Split(path, ".")
		for _, name := range names {
			if name == "" {
				errs = append(errs, fmt.Errorf("%s %q has an empty member name", key, path))
				return nil
			}
		}
		return names
	}
	v.idPath = split("hmac.id_path", hc.IDPath)
	v.typePath = split("hmac.type_path", hc.TypePath)
	v.challengePath = split("hmac.challenge_path", hc.ChallengePath)
	return errors.Join(errs...)
}

// parseCredentials checks the API keys and Basic Auth credentials.
func (v *hmacVerifier) parseCredentials(hc *HMACConfig) error {
	switch {
	case hc.APIKeyHeader != "" && len(hc.APIKeys) == 0:
		return errors.New("hmac.api_keys is required when hmac.api_key_header is set")
	case hc.APIKeyHeader == "" && len(hc.APIKeys) > 0:
		return errors.New("hmac.api_key_header is required when hmac.api_keys is set")
	}
	for i, key := range hc.APIKeys {
		if key == "" {
			return fmt.Errorf("hmac.api_keys[%d] is empty", i)
		}
		v.apiKeys = append(v.apiKeys, sha256.Sum256([]byte(key)))
	}
	return nil
}
