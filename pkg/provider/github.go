package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Headers of a GitHub webhook delivery, and the prefix of its signature.
const (
	githubSignatureHeader = "X-Hub-Signature-256"
	githubEventHeader     = "X-GitHub-Event"
	githubDeliveryHeader  = "X-GitHub-Delivery"
	githubSignaturePrefix = "sha256="
)

// githubMaxBodyBytes is the github preset's body limit. GitHub sends
// payloads of up to 25 MB and never retries on its own, so a 413 would lose
// the event.
const githubMaxBodyBytes = 25 << 20

// githubAuditHeaders are the headers a GitHub delivery keeps: the
// signature, the event and delivery ids, and the hook that sent it.
var githubAuditHeaders = []string{
	githubSignatureHeader,
	githubEventHeader,
	githubDeliveryHeader,
	"X-GitHub-Hook-ID",
	"X-GitHub-Hook-Installation-Target-Type",
	"X-GitHub-Hook-Installation-Target-ID",
}

func init() {
	register("github", adapt(newGitHubVerifier), Preset{MaxBodyBytes: githubMaxBodyBytes})
}

// githubVerifier verifies GitHub webhook deliveries. X-Hub-Signature-256 is
// "sha256=" followed by the lowercase hex HMAC-SHA256 of the raw body, keyed
// with the webhook secret's bytes. The legacy SHA-1 X-Hub-Signature is not
// accepted. Nothing signed carries a time, so there is no timestamp
// tolerance: the inbox's dedup key is what stops a replay. GitHub signs with
// one secret; configure the old and the new one side by side while rotating.
//
// GitHub sends one event per delivery. Its ID is X-GitHub-Delivery, which a
// manual redelivery keeps, and its Type is X-GitHub-Event ("push", "ping":
// the ping sent when a hook is created is an event like any other).
type githubVerifier struct {
	keys keyring
}

// newGitHubVerifier returns a GitHub verifier for the webhook secrets in
// config. Config.Tolerance and Config.Now are not used.
func newGitHubVerifier(config *Config) (*githubVerifier, error) {
	if err := errors.Join(config.validate(), config.requireSecrets()); err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	return &githubVerifier{keys: newKeyring(sha256.New, config.Secrets)}, nil
}

// Verify implements Verifier.
func (g *githubVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	value, err := requiredHeader(header, githubSignatureHeader)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	encoded, ok := strings.CutPrefix(value, githubSignaturePrefix)
	if !ok {
		return nil, fmt.Errorf("github: %s does not start with %q: %w", githubSignatureHeader, githubSignaturePrefix, ErrSignatureInvalid)
	}
	mac, ok := decodeHexMAC(encoded, sha256.Size)
	if !ok {
		return nil, fmt.Errorf("github: %s is not 64 lowercase hex digits: %w", githubSignatureHeader, ErrSignatureInvalid)
	}
	if !g.keys.matches([][]byte{mac}, body) {
		return nil, fmt.Errorf("github: %s matches no configured secret: %w", githubSignatureHeader, ErrSignatureInvalid)
	}
	p := parsePayload(body)
	event := p.event(body, header.Get(githubDeliveryHeader), header.Get(githubEventHeader), "header "+githubDeliveryHeader)
	return newDelivery(event, header, githubAuditHeaders...), nil
}
