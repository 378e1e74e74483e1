package receiver_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// githubDelivery returns the headers GitHub sends with body.
func githubDelivery(secret, deliveryID, event string, body []byte) http.Header {
	return http.Header{
		"X-Hub-Signature-256":                    {sign.GitHub(secret, body)},
		"X-Github-Delivery":                      {deliveryID},
		"X-Github-Event":                         {event},
		"X-Github-Hook-Id":                       {"292430182"},
		"X-Github-Hook-Installation-Target-Type": {"repository"},
		"X-Github-Hook-Installation-Target-Id":   {"79929171"},
		"User-Agent":                             {"GitHub-Hookshot/044aadd"},
		"Content-Type":                           {"application/json"},
	}
}

func TestEndToEndGitHub(t *testing.T) {
	t.Parallel()
	const secret = "e2e github secret"
	b := setupE2E(t, config.SourceConfig{Name: "gh", Provider: "github", Secrets: []config.Secret{"old github secret", secret}})

	issue := []byte(`{"action":"opened","issue":{"number":1347,"title":"Found a bug"},"repository":{"full_name":"octo/hello"}}`)
	r := b.post(t, "gh", githubDelivery(secret, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", issue), issue)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// A manual redelivery keeps X-GitHub-Delivery.
	r = b.post(t, "gh", githubDelivery(secret, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", issue), issue)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 1, "twins": 0}, r.counts(t))

	// The ping sent when a hook is created is stored like any event.
	ping := []byte(`{"zen":"Design for failure.","hook_id":292430182}`)
	r = b.post(t, "gh", githubDelivery(secret, "8a8f4c2e-0000-11e3-81ab-4c9367dc0958", "ping", ping), ping)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))

	// A forged delivery changes nothing.
	r = b.post(t, "gh", githubDelivery("wrong secret", "forged-1", "issues", issue), issue)
	require.Equal(t, http.StatusUnauthorized, r.Status)

	require.Equal(t, []e2eRow{
		{EventID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", EventType: "issues", Status: "pending", HasJob: true},
		{EventID: "8a8f4c2e-0000-11e3-81ab-4c9367dc0958", EventType: "ping", Status: "pending", HasJob: true},
	}, b.rows(t))
}

func TestEndToEndGitHubAcceptsPayloadsOverTheDefaultLimit(t *testing.T) {
	t.Parallel()
	const secret = "e2e github secret"
	// MaxBodyBytes is left unset: the github preset (25 MiB) applies, not
	// the receiver's 1 MiB default. GitHub never retries, so a 413 would
	// lose the event. The ack timeout is generous: this test is about the
	// size limit, and a 2 MB claim under -race on a busy machine is slow.
	b := setupE2E(t, config.SourceConfig{Name: "gh", Provider: "github", Secrets: []config.Secret{secret}, AckTimeout: time.Minute})
	var body bytes.Buffer
	body.WriteString(`{"ref":"refs/heads/main","commits":[`)
	for i := range 20_000 {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`{"id":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c","message":"Update README.md","added":[],"removed":[]}`)
	}
	body.WriteString(`]}`)
	require.Greater(t, body.Len(), 1<<20)
	require.Less(t, body.Len(), 25<<20)

	r := b.post(t, "gh", githubDelivery(secret, "big-1", "push", body.Bytes()), body.Bytes())
	require.Equal(t, http.StatusOK, r.Status, "body %s", r.Body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	require.Equal(t, []e2eRow{{EventID: "big-1", EventType: "push", Status: "pending", HasJob: true}}, b.rows(t))
}
