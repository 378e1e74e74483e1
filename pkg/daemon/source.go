package daemon

import (
	"fmt"
	"net/netip"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/receiver"
)

// NewSource builds a receiver source from its config: the provider's
// verifier with the source's credentials, and the limits the receiver
// enforces around it.
func NewSource(sc *config.SourceConfig) (*receiver.Source, error) {
	pc := &provider.Config{
		Secrets:   sc.Secrets,
		Tolerance: sc.Tolerance,
		URL:       sc.URL,
		Algorithm: sc.Algorithm,
		TwinTypes: sc.TwinTypes,
	}
	for _, ba := range sc.BasicAuth {
		pc.BasicAuth = append(pc.BasicAuth, provider.BasicAuth{Username: ba.Username, Password: ba.Password})
	}
	if sc.Provider == "hmac" {
		h := sc.HMAC
		pc.HMAC = &provider.HMACConfig{
			Header: h.Header, Prefix: h.Prefix, Encoding: h.Encoding, Template: h.Template,
			TimestampHeader: h.TimestampHeader, IDHeader: h.IDHeader, IDPath: h.IDPath,
			TypeHeader: h.TypeHeader, TypePath: h.TypePath, APIKeyHeader: h.APIKeyHeader,
			APIKeys: h.APIKeys, ChallengePath: h.ChallengePath,
		}
	}
	v, err := provider.New(sc.Provider, pc)
	if err != nil {
		return nil, err
	}
	src := &receiver.Source{
		Name: sc.Name, Provider: sc.Provider, Verifier: v,
		MaxBodyBytes: sc.MaxBodyBytes, AckTimeout: sc.AckTimeout,
	}
	for i, cidr := range sc.AllowIPs {
		prefix, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("allow_ips[%d]: %w", i, err)
		}
		src.AllowIPs = append(src.AllowIPs, prefix)
	}
	return src, nil
}
