package webhook

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// signHMAC signs for an hmac source: HMACHeaders, plus the type header.
func signHMAC(p *Params) (http.Header, error) {
	if p.Config != nil && p.Config.HMAC != nil {
		hc := p.Config.HMAC
		if err := p.requireHeaderKeys("hmac", hc.IDHeader != "", hc.TypeHeader != ""); err != nil {
			return nil, err
		}
	}
	header, err := HMACHeaders(p.Config, p.Secret, p.Time, p.EventID, p.Body)
	if err != nil {
		return nil, err
	}
	if typeHeader := p.Config.HMAC.TypeHeader; typeHeader != "" && p.EventType != "" {
		header.Set(typeHeader, p.EventType)
	}
	return header, nil
}

// HMACHeaders returns the headers a sender configured like config's hmac
// provider sends with body, signed with secret at t: the signature (with its
// prefix), the timestamp and id headers when configured, and the first
// configured Basic Auth credentials and API key. id is required
// (ErrEventIDRequired) when the template signs {id}. config must be one the
// hmac provider accepts.
func HMACHeaders(config *provider.Config, secret string, t time.Time, id string, body []byte) (http.Header, error) {
	if config == nil {
		return nil, errors.New("hmac: signing needs the source's config")
	}
	c := *config
	c.Secrets = []string{secret}
	if _, err := provider.New("hmac", &c); err != nil {
		return nil, err
	}
	hc := c.HMAC
	template, err := sign.ParseTemplate(hc.Template)
	if err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	newHash, err := sign.HashNamed(c.Algorithm, "sha1", "sha256", "sha512")
	if err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	if template.Uses("id") && id == "" {
		return nil, fmt.Errorf("hmac: the template signs {id}: %w", ErrEventIDRequired)
	}
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := sign.MAC(newHash, []byte(secret), template.Signed(body, timestamp, id)...)
	encoded := hex.EncodeToString(mac)
	if hc.Encoding == "base64" {
		encoded = base64.StdEncoding.EncodeToString(mac)
	}
	header := http.Header{}
	header.Set(hc.Header, hc.Prefix+encoded)
	if hc.TimestampHeader != "" {
		header.Set(hc.TimestampHeader, timestamp)
	}
	if hc.IDHeader != "" && id != "" {
		header.Set(hc.IDHeader, id)
	}
	if len(c.BasicAuth) > 0 {
		setBasicAuth(header, c.BasicAuth[0])
	}
	if hc.APIKeyHeader != "" {
		header.Set(hc.APIKeyHeader, hc.APIKeys[0])
	}
	return header, nil
}
