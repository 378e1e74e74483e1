package worker

import (
	"fmt"
	"strings"
)

// Route sends a source's events whose type matches one of Types to
// Handlers, run in order.
type Route struct {
	// Source is a source name, or "*" for every source.
	Source string
	// Types are patterns: "*", an exact type, or a prefix ending in ".*"
	// ("payment_intent.*" matches "payment_intent.succeeded"). Empty means "*".
	Types []string
	// Handlers are names in the Registry.
	Handlers []string
}

// Router picks an event's handlers: the first route that matches decides.
type Router struct {
	routes []compiledRoute
}

type compiledRoute struct {
	source   string
	types    []string
	handlers []Handler
}

// NewRouter resolves the routes' handler names against registry.
func NewRouter(routes []Route, registry *Registry) (*Router, error) {
	r := &Router{}
	for i, route := range routes {
		if len(route.Handlers) == 0 {
			return nil, fmt.Errorf("worker: route %d has no handlers", i)
		}
		cr := compiledRoute{source: route.Source, types: route.Types}
		if len(cr.types) == 0 {
			cr.types = []string{"*"}
		}
		for _, name := range route.Handlers {
			h, err := registry.lookup(name)
			if err != nil {
				return nil, fmt.Errorf("worker: route %d: %w", i, err)
			}
			cr.handlers = append(cr.handlers, h)
		}
		r.routes = append(r.routes, cr)
	}
	return r, nil
}

// Match returns the handlers of the first route matching the event, and
// false when none does.
func (r *Router) Match(source, eventType string) ([]Handler, bool) {
	for _, route := range r.routes {
		if route.source != "*" && route.source != source {
			continue
		}
		for _, pattern := range route.types {
			if typeMatches(pattern, eventType) {
				return route.handlers, true
			}
		}
	}
	return nil, false
}

func typeMatches(pattern, eventType string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, ".*"):
		return strings.HasPrefix(eventType, pattern[:len(pattern)-1])
	default:
		return pattern == eventType
	}
}
