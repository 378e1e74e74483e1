package receiver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

// hmacE2ESource is a generic hmac source with every option on: a templated
// signature with a timestamp and a signed id header, the type from the
// body, Basic Auth and an API key on top, and a challenge echo.
func hmacE2ESource() config.SourceConfig {
	return config.SourceConfig{
		Name: "acme", Provider: "hmac", Secrets: []config.Secret{"acme_old_secret", "acme_secret"}, Algorithm: "sha512",
		BasicAuth: []config.BasicAuthConfig{{Username: "acme", Password: "acme-basic-password"}},
		HMAC: config.HMACConfig{
			Header: "X-Acme-Signature", Prefix: "v1=", Encoding: "base64", Template: "{timestamp}.{id}.{body}",
			TimestampHeader: "X-Acme-Timestamp", IDHeader: "X-Acme-Delivery", TypePath: "event.type",
			APIKeyHeader: "X-Acme-Key", APIKeys: []config.Secret{"acme-api-key"}, ChallengePath: "challenge",
		},
	}
}

// hmacE2EConfig is the provider's view of a source, for signing.
func hmacE2EConfig(sc config.SourceConfig) *provider.Config {
	h := sc.HMAC
	pc := &provider.Config{Algorithm: sc.Algorithm, HMAC: &provider.HMACConfig{
		Header: h.Header, Prefix: h.Prefix, Encoding: h.Encoding, Template: h.Template,
		TimestampHeader: h.TimestampHeader, IDHeader: h.IDHeader, IDPath: h.IDPath, TypeHeader: h.TypeHeader,
		TypePath: h.TypePath, APIKeyHeader: h.APIKeyHeader, APIKeys: secret.Reveal(h.APIKeys), ChallengePath: h.ChallengePath,
	}}
	for _, ba := range sc.BasicAuth {
		pc.BasicAuth = append(pc.BasicAuth, provider.BasicAuth{Username: ba.Username, Password: ba.Password.Reveal()})
	}
	return pc
}

func TestEndToEndHMAC(t *testing.T) {
	t.Parallel()
	source := hmacE2ESource()
	b := setupE2E(t, source)
	sign := func(t *testing.T, secret, id string, at time.Time, body []byte) http.Header {
		t.Helper()
		header, err := webhook.HMACHeaders(hmacE2EConfig(source), secret, at, id, body)
		require.NoError(t, err)
		return header
	}
	body := []byte(`{"event":{"type":"invoice.paid"},"data":{"invoice":"in_1"}}`)

	r := b.post(t, "acme", sign(t, "acme_secret", "dlv_1", time.Now(), body), body)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// The sender's retry: re-signed later, with the old secret still configured.
	r = b.post(t, "acme", sign(t, "acme_old_secret", "dlv_1", time.Now().Add(time.Minute), body), body)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// Forged, stale, or missing one of the composite checks: 401, nothing stored.
	edited := func(name, value string) http.Header {
		h := sign(t, "acme_secret", "dlv_2", time.Now(), body)
		h.Del(name)
		if value != "" {
			h.Set(name, value)
		}
		return h
	}
	for name, header := range map[string]http.Header{
		"WrongSecret":  sign(t, "acme_wrong_secret", "dlv_2", time.Now(), body),
		"Stale":        sign(t, "acme_secret", "dlv_2", time.Now().Add(-10*time.Minute), body),
		"TamperedBody": sign(t, "acme_secret", "dlv_2", time.Now(), []byte(`{"event":{"type":"invoice.paid"}}`)),
		"ChangedID":    edited("X-Acme-Delivery", "dlv_3"),
		"NoBasicAuth":  edited("Authorization", ""),
		"WrongAPIKey":  edited("X-Acme-Key", "nope"),
		"NoSignature":  edited("X-Acme-Signature", ""),
		"NoTimestamp":  edited("X-Acme-Timestamp", ""),
	} {
		r := b.post(t, "acme", header, body)
		require.Equal(t, http.StatusUnauthorized, r.Status, name)
	}

	// The handshake is echoed as sent and never stored.
	challenge := []byte(`{"challenge":"c-7f3a9e"}`)
	r = b.post(t, "acme", sign(t, "acme_secret", "hs_1", time.Now(), challenge), challenge)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "c-7f3a9e", string(r.Body))
	require.Equal(t, "text/plain", r.Header.Get("Content-Type"))
	// An unsigned handshake is not answered.
	header := sign(t, "acme_secret", "hs_2", time.Now(), challenge)
	header.Del("X-Acme-Signature")
	require.Equal(t, http.StatusUnauthorized, b.post(t, "acme", header, challenge).Status)

	require.Equal(t, []e2eRow{{EventID: "dlv_1", EventType: "invoice.paid", Status: "pending", HasJob: true}}, b.rows(t))
}

// TestEndToEndHMACGitHubVector posts GitHub's documented vector
// (/work/shared/providers.md §3) to a source configured like GitHub: an
// authentic body that is not JSON is recorded as failed under its id.
func TestEndToEndHMACGitHubVector(t *testing.T) {
	t.Parallel()
	b := setupE2E(t, config.SourceConfig{
		Name: "gh", Provider: "hmac", Secrets: []config.Secret{"It's a Secret to Everybody"},
		HMAC: config.HMACConfig{Header: "X-Hub-Signature-256", Prefix: "sha256=", IDHeader: "X-GitHub-Delivery", TypeHeader: "X-GitHub-Event"},
	})
	header := http.Header{
		"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
		"X-Github-Delivery":   {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Event": {"ping"},
	}
	r := b.post(t, "gh", header, []byte("Hello, World!"))
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	header.Set("X-Hub-Signature-256", "sha256=057107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17") // one digit off
	require.Equal(t, http.StatusUnauthorized, b.post(t, "gh", header, []byte("Hello, World!")).Status)

	rows := b.rows(t)
	require.Len(t, rows, 1)
	require.Equal(t, "72d3162e-cc78-11e3-81ab-4c9367dc0958", rows[0].EventID)
	require.Equal(t, "ping", rows[0].EventType)
	require.Equal(t, "failed", rows[0].Status)
	require.Contains(t, rows[0].LastError, "not JSON")
}

func TestEndToEndHMACIDFromTheBody(t *testing.T) {
	t.Parallel()
	b := setupE2E(t, config.SourceConfig{
		Name: "plain", Provider: "hmac", Secrets: []config.Secret{"plain_secret"},
		HMAC: config.HMACConfig{Header: "X-Signature", IDPath: "data.id", TypePath: "type"},
	})
	pc := &provider.Config{HMAC: &provider.HMACConfig{Header: "X-Signature", IDPath: "data.id", TypePath: "type"}}
	for i, body := range []string{`{"type":"order.created","data":{"id":42}}`, `{"type":"order.created","data":{"id":42}}`, `{"type":"order.paid","data":{"id":"ord_43"}}`} {
		header, err := webhook.Headers(&webhook.Params{Provider: "hmac", Secret: "plain_secret", Body: []byte(body), Config: pc})
		require.NoError(t, err)
		r := b.post(t, "plain", header, []byte(body))
		require.Equal(t, http.StatusOK, r.Status, "%d: %s", i, r.Body)
	}
	require.Equal(t, []e2eRow{
		{EventID: "42", EventType: "order.created", Status: "pending", HasJob: true},
		{EventID: "ord_43", EventType: "order.paid", Status: "pending", HasJob: true},
	}, b.rows(t))
}
