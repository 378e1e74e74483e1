package config

import (
	"net/netip"
	"reflect"
	"slices"

	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// hmacProvider is the config name of the generic provider that reads
// sources[].hmac.
const hmacProvider = "hmac"

// ProviderConfig returns the provider.Config the source's verifier is built
// from: its credentials, tolerance and provider-specific keys, copied so that
// the verifier shares no slice with the source. HMAC is set only for the
// hmac provider; Now is left nil (time.Now). Validate passes it to
// provider.New, so after Load, provider.New(s.Provider, s.ProviderConfig())
// succeeds.
func (s *SourceConfig) ProviderConfig() *provider.Config {
	pc := &provider.Config{
		Secrets:   secret.Reveal(s.Secrets),
		Tolerance: s.Tolerance,
		URL:       s.URL.Reveal(),
		Algorithm: s.Algorithm,
		TwinTypes: slices.Clone(s.TwinTypes), // Keeps nil (the default list) apart from empty (off).
	}
	for _, ba := range s.BasicAuth {
		pc.BasicAuth = append(pc.BasicAuth, provider.BasicAuth{Username: ba.Username, Password: ba.Password.Reveal()})
	}
	if s.Provider == hmacProvider {
		h := &s.HMAC
		pc.HMAC = &provider.HMACConfig{
			Header:          h.Header,
			Prefix:          h.Prefix,
			Encoding:        h.Encoding,
			Template:        h.Template,
			TimestampHeader: h.TimestampHeader,
			IDHeader:        h.IDHeader,
			IDPath:          h.IDPath,
			TypeHeader:      h.TypeHeader,
			TypePath:        h.TypePath,
			APIKeyHeader:    h.APIKeyHeader,
			APIKeys:         secret.Reveal(h.APIKeys),
			ChallengePath:   h.ChallengePath,
		}
	}
	return pc
}

// AllowIPPrefixes parses AllowIPs (see its doc comment for the accepted
// forms). An error names the entry as allow_ips[i]; after Load, which
// validated them, there is none.
func (s *SourceConfig) AllowIPPrefixes() ([]netip.Prefix, error) {
	return receiver.ParsePrefixes("allow_ips", s.AllowIPs)
}

// isZero reports whether no hmac key is set.
func (h *HMACConfig) isZero() bool { return reflect.ValueOf(*h).IsZero() }

// RetentionPolicy returns the source's retention policy: what the worker's
// retention job and `inboxctl prune` apply, and what Load checks
// (internal/retention's Policy.Check) for every command that writes the
// inbox.
func (s *SourceConfig) RetentionPolicy() *worker.RetentionPolicy {
	return &worker.RetentionPolicy{Source: s.Name, Provider: s.Provider, Retention: s.Retention, PayloadRetention: s.PayloadRetention}
}
