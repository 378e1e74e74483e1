package daemon

import (
	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// newSource builds a receiver source from its config: the provider's
// verifier with the source's credentials (config.SourceConfig.ProviderConfig),
// and the limits and allowed networks the receiver enforces around it.
func newSource(sc *config.SourceConfig) (*receiver.Source, error) {
	v, err := provider.New(sc.Provider, sc.ProviderConfig())
	if err != nil {
		return nil, err
	}
	allowIPs, err := sc.AllowIPPrefixes()
	if err != nil {
		return nil, err
	}
	return &receiver.Source{
		Name: sc.Name, Provider: sc.Provider, Verifier: v,
		MaxBodyBytes: sc.MaxBodyBytes, AckTimeout: sc.AckTimeout,
		AllowIPs: allowIPs,
	}, nil
}
