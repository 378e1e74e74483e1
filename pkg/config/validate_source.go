package config

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/internal/retention"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

func (c *Config) validateSources(p *problems) {
	known := provider.Names()
	firstIndex := make(map[string]int, len(c.Sources))
	keys := c.sourceKeys()
	for i := range c.Sources {
		s := &c.Sources[i]
		key := keys[i]

		switch first, dup := firstIndex[s.Name]; {
		case s.Name == "":
			p.addf(key+".name", "required")
		case !sourceNameRE.MatchString(s.Name):
			p.addf(key+".name", "%q must match %s", s.Name, sourceNameRE)
		case dup:
			p.addf(key+".name", "duplicate %q (also sources[%d])", s.Name, first)
		default:
			firstIndex[s.Name] = i
		}

		knownProvider := false
		switch {
		case s.Provider == "":
			p.addf(key+".provider", "required (one of %s)", strings.Join(known, ", "))
		case !slices.Contains(known, s.Provider):
			p.addf(key+".provider", "unknown %q (known: %s)", s.Provider, strings.Join(known, ", "))
		default:
			knownProvider = true
		}

		// provider.New is asked only about keys that passed the generic
		// checks, so that one mistake is reported once.
		before := len(*p)
		validateVerifierKeys(p, key, s)
		if knownProvider && len(*p) == before {
			if _, err := provider.New(s.Provider, s.ProviderConfig()); err != nil {
				*p = append(*p, &problem{key: key, err: fmt.Errorf("%s", s.scrub(err.Error())), needKey: key + ".secrets"})
			}
		}

		// A value inherited from the receiver is reported once, under
		// the receiver's key.
		if s.MaxBodyBytes != c.Receiver.MaxBodyBytes {
			positive(p, key+".max_body_bytes", s.MaxBodyBytes)
		}
		if s.AckTimeout != c.Receiver.AckTimeout {
			positive(p, key+".ack_timeout", s.AckTimeout)
		}
		queueName(p, key+".queue", s.Queue)
		prefixes(p, key+".allow_ips", s.AllowIPs)
		validateRetention(p, key, s)
	}
}

// validateVerifierKeys checks the keys that ProviderConfig passes on, as far
// as they mean the same for every provider; provider.New then checks what its
// provider requires (secrets, basic_auth, url, hmac.header …).
func validateVerifierKeys(p *problems, key string, s *SourceConfig) {
	// An empty secret or password would let anyone in, so one is never ignored.
	for j, secret := range s.Secrets {
		if strings.TrimSpace(secret.Reveal()) == "" {
			p.addf(fmt.Sprintf("%s.secrets[%d]", key, j), "must not be empty")
		}
	}
	positive(p, key+".tolerance", s.Tolerance)
	for j, ba := range s.BasicAuth {
		baKey := fmt.Sprintf("%s.basic_auth[%d]", key, j)
		switch {
		case ba.Username == "":
			p.addf(baKey+".username", "required")
		case strings.Contains(ba.Username, ":"):
			p.addf(baKey+".username", "must not contain ':' (HTTP Basic cannot carry it)")
		}
		if strings.TrimSpace(ba.Password.Reveal()) == "" {
			p.addf(baKey+".password", "must not be empty")
		}
	}
	if s.URL != "" {
		if u, err := url.Parse(s.URL.Reveal()); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.addf(key+".url", "must be an absolute https:// or http:// URL, exactly as registered at the provider")
		}
	}
	if !slices.Contains([]string{"", "sha1", "sha256", "sha512"}, s.Algorithm) {
		p.addf(key+".algorithm", "must be sha1, sha256 or sha512, not %q", s.Algorithm)
	}
	validateProviderKeys(p, key, s)
	validateTwinTypes(p, key, s)
	validateHMAC(p, key, s)
}

// validateTwinTypes refuses twin_types outside stripe, and any type that can
// recur for one object: its second occurrence would be dropped as a twin.
func validateTwinTypes(p *problems, key string, s *SourceConfig) {
	if s.TwinTypes == nil {
		return
	}
	if s.Provider != "stripe" {
		p.addf(key+".twin_types", "only the stripe provider has twin types")
		return
	}
	for j, typ := range s.TwinTypes {
		typKey := fmt.Sprintf("%s.twin_types[%d]", key, j)
		switch {
		case strings.TrimSpace(typ) == "":
			p.addf(typKey, "must not be empty")
		case strings.ContainsAny(typ, "* \t\r\n"):
			p.addf(typKey, "%q must be an exact event type", typ)
		case typ == "charge.refunded" || strings.HasSuffix(typ, ".updated") || strings.HasSuffix(typ, ".payment_failed"):
			p.addf(typKey, "%q can happen more than once per object; as a twin type its repeats would be dropped", typ)
		}
	}
}

// providerKeys are the source keys only some providers read. Set for another
// provider such a key would be ignored, and an operator who added basic_auth
// to a github source would believe it enforced, so it is refused instead.
// twin_types (stripe) is checked by validateTwinTypes.
var providerKeys = []struct {
	key       string
	providers []string
	isSet     func(*SourceConfig) bool
}{
	{"basic_auth", []string{"marqeta", "adyen", hmacProvider}, func(s *SourceConfig) bool { return len(s.BasicAuth) > 0 }},
	{"url", []string{"square", "twilio"}, func(s *SourceConfig) bool { return s.URL != "" }},
	{"algorithm", []string{"marqeta", hmacProvider}, func(s *SourceConfig) bool { return s.Algorithm != "" }},
	{"hmac", []string{hmacProvider}, func(s *SourceConfig) bool { return !s.HMAC.isZero() }},
}

// validateProviderKeys refuses a key set for a provider that ignores it.
func validateProviderKeys(p *problems, key string, s *SourceConfig) {
	for _, pk := range providerKeys {
		if pk.isSet(s) && !slices.Contains(pk.providers, s.Provider) {
			if len(pk.providers) == 1 {
				p.addf(key+"."+pk.key, "only the %s provider reads %s", pk.providers[0], pk.key)
			} else {
				last := len(pk.providers) - 1
				p.addf(key+"."+pk.key, "only the %s and %s providers read %s",
					strings.Join(pk.providers[:last], ", "), pk.providers[last], pk.key)
			}
		}
	}
}

// validateHMAC checks sources[].hmac of an hmac source.
func validateHMAC(p *problems, key string, s *SourceConfig) {
	h := &s.HMAC
	if s.Provider != hmacProvider {
		return // validateProviderKeys refuses it.
	}
	if !slices.Contains([]string{"", "hex", "base64"}, h.Encoding) {
		p.addf(key+".hmac.encoding", "must be hex or base64, not %q", h.Encoding)
	}
	switch {
	case h.APIKeyHeader != "" && len(h.APIKeys) == 0:
		p.addf(key+".hmac.api_keys", "at least one key is required when hmac.api_key_header is set")
	case h.APIKeyHeader == "" && len(h.APIKeys) > 0:
		p.addf(key+".hmac.api_key_header", "required when hmac.api_keys is set")
	}
	for j, apiKey := range h.APIKeys {
		if strings.TrimSpace(apiKey.Reveal()) == "" {
			p.addf(fmt.Sprintf("%s.hmac.api_keys[%d]", key, j), "must not be empty")
		}
	}
}

// minScrubbedLen is the length from which scrub hides a credential: a
// shorter one would mangle the message ("s" in every word) and is no real
// secret anyway.
const minScrubbedLen = 8

// scrub replaces every credential of s that appears in msg, so that an error
// from provider.New cannot carry one into a log.
func (s *SourceConfig) scrub(msg string) string {
	var credentials []string
	collectSecrets(reflect.ValueOf(s).Elem(), &credentials)
	// Longest first, so that a credential containing another goes whole.
	slices.SortFunc(credentials, func(a, b string) int { return len(b) - len(a) })
	for _, credential := range credentials {
		if len(credential) >= minScrubbedLen {
			msg = strings.ReplaceAll(msg, credential, "[redacted]")
		}
	}
	return msg
}

// prefixes checks allow_ips-style entries (see receiver.ParsePrefix).
func prefixes(p *problems, key string, entries []string) {
	for i, entry := range entries {
		if _, err := receiver.ParsePrefix(entry); err != nil {
			p.addf(fmt.Sprintf("%s[%d]", key, i), "%s", err)
		}
	}
}

// validateRetention refuses a retention shorter than the provider's
// redelivery window (retention.Policy.Check decides: a redelivery after the
// prune would be claimed as new and processed twice), and a payload
// retention that would never apply.
func validateRetention(p *problems, key string, s *SourceConfig) {
	policy := retention.Policy(*s.RetentionPolicy())
	if s.Retention <= 0 {
		p.addf(key+".retention", "must be positive")
	} else if err := policy.Check(); err != nil {
		p.addf(key+".retention", "%s", err)
	}
	switch {
	case s.PayloadRetention < 0:
		p.addf(key+".payload_retention", "must not be negative")
	case s.PayloadRetention > 0 && s.PayloadRetention >= s.Retention:
		p.addf(key+".payload_retention", "%s is not shorter than retention (%s), so it would never erase anything", s.PayloadRetention, s.Retention)
	}
}
