package worker

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hookinbox/hookinbox/pkg/effect"
)

// Route sends a source's events whose type matches one of Types to
// Handlers, run in order.
//
// Its tagged fields are one entry of the worker: section's routes list.
type Route struct {
	// Source is a source name, or "*" for any. Required.
	Source string `mapstructure:"source"`
	// Types are event-type patterns: "*", an exact type, or a prefix ending
	// in ".*" ("payment_intent.*" matches "payment_intent.succeeded").
	// Defaults to ["*"].
	Types []string `mapstructure:"types"`
	// Handlers are registered handler names run in order in the event's
	// transaction ("noop", "log", "mirror", or ones a worker binary
	// registers in the Registry).
	Handlers []string `mapstructure:"handlers"`
	// Mirror says where the mirror handler finds each event's object (see
	// effect.Spec for the locators). A field left empty takes the
	// provider's documented default (effect.DefaultSpec: stripe, shopify,
	// square, paddle); nil takes them all.
	Mirror *effect.Spec `mapstructure:"mirror"`
	// Isolation is the handler transaction's isolation level:
	// read_committed, repeatable_read or serializable. Defaults to
	// worker.isolation (Config.Isolation).
	Isolation Isolation `mapstructure:"isolation"`
	// Lock, when set, runs the handlers under an advisory lock (see
	// LockOption).
	Lock *LockOption `mapstructure:"lock"`
	// Sequence, when set, processes events sharing a key one at a time, in
	// order (see SequenceOption).
	Sequence *SequenceOption `mapstructure:"sequence"`
	// Filter runs the handlers only for the events meeting every
	// condition; the route still decides for the others (it matched their
	// source and type), which are marked done with a note. Defaults to
	// none: every event.
	Filter []Condition `mapstructure:"filter"`
	// Destinations are the outbox destinations (worker.destinations) the
	// forward handler enqueues each event to; a worker binary's handler may
	// read them (RouteFrom) to send its own messages. Required by forward.
	Destinations []string `mapstructure:"destinations"`
}

// router picks an event's handlers: the first route that matches decides.
type router struct {
	routes []compiledRoute
}

// sequenceOf is the sequence option of the route of source's eventType
// events, nil when it has none: only a route that has one wakes the next
// parked event of its key when its run ends. Sequencing is a route's, not
// a source's: a source may have a sequenced route and one that is not.
func (r *router) sequenceOf(source, eventType string) *SequenceOption {
	if route, ok := r.matchRoute(source, eventType); ok {
		return route.route.Sequence
	}
	return nil
}

type compiledRoute struct {
	source   string
	types    []string
	handlers []Handler
	// route is the route as configured, with its options checked.
	route *Route
}

// newRouter resolves the routes' handler names against registry.
func newRouter(routes []Route, registry *Registry) (*router, error) {
	r := &router{}
	for i, route := range routes {
		if len(route.Handlers) == 0 {
			return nil, fmt.Errorf("worker: route %d has no handlers", i)
		}
		checked, err := checkRouteOptions(route)
		if err != nil {
			return nil, fmt.Errorf("worker: route %d: %w", i, err)
		}
		cr := compiledRoute{source: route.Source, types: route.Types, route: checked}
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

// matchRoute returns the first route matching the event.
func (r *router) matchRoute(source, eventType string) (*compiledRoute, bool) {
	for i := range r.routes {
		route := &r.routes[i]
		if route.source != "*" && route.source != source {
			continue
		}
		for _, pattern := range route.types {
			if typeMatches(pattern, eventType) {
				return route, true
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

// checkRoutes checks that routes can run every event a worker working queues
// will take. sources maps each source's name to its queue (the queue the
// receiver enqueues its events on). It fails, naming every gap, when a
// source on a worked queue has no route (neither its name nor "*"): that
// worker would take the source's events off the queue and settle them
// without running the handlers meant for them, while a worker that has them
// never sees them. A route naming an unknown source is refused as well: it is
// a typo, and the events meant for it would fall through to a later route.
//
// The warnings are for what is odd but loses nothing: a route whose source
// is on a queue this worker does not work (it never runs here; the source's
// events wait on their own queue for the worker that works it), and a worked
// queue that no source uses.
func checkRoutes(routes []Route, sources map[string]string, queues []string) (warnings []string, err error) {
	worked := make(map[string]bool, len(queues))
	for _, q := range queues {
		worked[q] = true
	}
	covered := map[string]bool{}
	var errs []error
	for i, route := range routes {
		switch queue, known := sources[route.Source]; {
		case route.Source == "*":
			for name := range sources {
				covered[name] = true
			}
		case !known:
			errs = append(errs, fmt.Errorf("worker.routes[%d].source: unknown source %q", i, route.Source))
		case !worked[queue]:
			warnings = append(warnings, fmt.Sprintf(
				"worker.routes[%d] can never run here: source %q's events go to queue %q, which this worker does not work (worker.queues)",
				i, route.Source, queue))
		default:
			covered[route.Source] = true
		}
	}
	used := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		queue := sources[name]
		used[queue] = true
		if worked[queue] && !covered[name] {
			errs = append(errs, fmt.Errorf(
				"worker.routes: no route for source %q, whose events go to queue %q (worker.queues); add a route or stop working that queue",
				name, queue))
		}
	}
	for _, q := range queues {
		if !used[q] {
			warnings = append(warnings, fmt.Sprintf("worker.queues: no source uses queue %q (sources[].queue); this worker finds no events there", q))
		}
	}
	return warnings, errors.Join(errs...)
}

// queueRoutes describes, in one canonical line, what a worker does with the
// events on queue: the routes that can match a source on it, in order, each
// with every option that changes how its events are handled (its
// transaction's isolation, isolation being the worker's default, a lock, a
// sequence, a mirror spec, with their defaults filled in), and what becomes
// of an event none matches. Two workers sharing a queue must describe it
// alike, or each settles events the other has routes for, or handles them
// otherwise (one sequenced, the other not).
func queueRoutes(routes []Route, sources map[string]string, queue string, isolation Isolation, failUnrouted bool) string {
	var b strings.Builder
	for _, route := range routes {
		if route.Source != "*" && sources[route.Source] != queue {
			continue
		}
		types := route.Types
		if len(types) == 0 {
			types = []string{"*"}
		}
		fmt.Fprintf(&b, "%s %s", route.Source, strings.Join(types, ","))
		for _, c := range route.Filter {
			fmt.Fprintf(&b, " where %s in [%s]", c.Path, strings.Join(c.In, ","))
		}
		fmt.Fprintf(&b, " -> %s", strings.Join(route.Handlers, ","))
		if len(route.Destinations) > 0 {
			fmt.Fprintf(&b, " to %s", strings.Join(route.Destinations, ","))
		}
		b.WriteString(routeOptions(route, isolation))
		b.WriteString("; ")
	}
	unrouted := "done"
	if failUnrouted {
		unrouted = "failed"
	}
	fmt.Fprintf(&b, "unrouted -> %s", unrouted)
	return b.String()
}

// routeOptions describes the options of route that change how its events
// are handled, as queueRoutes writes them: " with " and their JSON, with
// the defaults filled in (so that a default written out describes the same
// route as one left out); "" for a route with none (read_committed, the
// product's default isolation, is none).
func routeOptions(route Route, isolation Isolation) string {
	checked, err := checkRouteOptions(route)
	if err != nil {
		// New refused such a route before its routes were described.
		checked = &route
	}
	iso := cmp.Or(checked.Isolation, isolation)
	if iso == isolationDefault {
		iso = ""
	}
	if iso == "" && checked.Lock == nil && checked.Sequence == nil && checked.Mirror == nil {
		return ""
	}
	b, _ := json.Marshal(struct {
		Isolation Isolation       `json:",omitempty"`
		Lock      *LockOption     `json:",omitempty"`
		Sequence  *SequenceOption `json:",omitempty"`
		Mirror    *effect.Spec    `json:",omitempty"`
	}{iso, checked.Lock, checked.Sequence, checked.Mirror})
	return " with " + string(b)
}
