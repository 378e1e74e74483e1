package config

import (
	"slices"

	"github.com/hookinbox/hookinbox/pkg/worker"
)

// validateRouteOrdering checks what a route's mirror and sequence need from
// the providers of the sources it applies to; worker.Config.Validate checks
// the rest of the route.
func (c *Config) validateRouteOrdering(p *problems, key string, route *worker.Route) {
	providers := c.routeProviders(route.Source)
	usesMirror := slices.Contains(route.Handlers, worker.MirrorHandlerName)
	sequenced := route.Sequence != nil && route.Sequence.Key != ""
	for _, prov := range providers {
		spec, ok := route.MirrorSpec(prov)
		if !usesMirror && sequenced && route.Sequence.Order != "" {
			continue
		}
		if !ok && (usesMirror || sequenced) {
			p.addf(key+".mirror", "required for provider %q, which has no default (set kind, id and version)", prov)
			continue
		}
		if ok && usesMirror {
			if err := spec.Validate(); err != nil {
				p.addf(key+".mirror", "for provider %q: %s", prov, err)
			}
		}
	}
}

// routeProviders lists the providers of the sources a route applies to.
func (c *Config) routeProviders(source string) []string {
	var out []string
	for _, s := range c.Sources {
		if (source == "*" || s.Name == source) && !slices.Contains(out, s.Provider) {
			out = append(out, s.Provider)
		}
	}
	return out
}
