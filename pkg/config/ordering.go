package config

import (
	"slices"
	"time"

	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// MirrorConfig says where the built-in mirror handler finds each event's
// object. Each field is a locator (see effect.Spec): a dotted JSON path
// ("data.object.id"), "header:Name", "type_prefix" or "=literal", several
// joined by "|". A field left empty takes the provider's documented default
// (effect.DefaultSpec: stripe, shopify, square, paddle).
type MirrorConfig struct {
	// Kind locates the object's kind.
	Kind string `mapstructure:"kind"`
	// ID locates the object's id.
	ID string `mapstructure:"id"`
	// Version locates the object's version: a revision counter or a time.
	Version string `mapstructure:"version"`
	// EventTime locates the provider's event time, the first tie-breaker.
	EventTime string `mapstructure:"event_time"`
	// Tie is the rule for tied versions: arrival (the default: the later
	// event time, then the later delivery wins) or keep_first.
	Tie string `mapstructure:"tie"`
}

// LockConfig runs a route's handlers under pg_try_advisory_xact_lock, keyed
// by SHA-256 of the source and the located key; a busy event is snoozed,
// which is not an attempt. Set when Key is.
type LockConfig struct {
	// Key locates the lock key in the event.
	Key string `mapstructure:"key"`
	// Snooze is how long a busy event waits before trying again.
	// Defaults to 1s (worker.LockSnoozeDefault).
	Snooze time.Duration `mapstructure:"snooze"`
}

// SequenceConfig processes a route's events that share a key one at a time,
// in order. Set when Key is.
type SequenceConfig struct {
	// Key locates the sequence key: a JSON path or "header:Name".
	Key string `mapstructure:"key"`
	// Order locates the order within a key (an integer or an RFC 3339
	// time). Defaults to the route's mirror version (or its provider's).
	Order string `mapstructure:"order"`
	// HoldBack holds each event until it is this old, so that older events
	// arriving within the window go first. Defaults to 0: process at once,
	// and report a late event as late.
	HoldBack time.Duration `mapstructure:"hold_back"`
	// PoisonAfter is how many failed attempts of an event stop it from
	// holding back its key. Defaults to 3 (worker.SequencePoisonAfterDefault);
	// set it to worker.max_attempts to hold the key until the event is
	// failed for good.
	PoisonAfter int `mapstructure:"poison_after"`
}

const defaultRouteSequencePoisonAfter = worker.SequencePoisonAfterDefault

// applyOrderingDefaults fills the ordering options' defaults of a route.
func applyOrderingDefaults(r *RouteConfig) {
	if r.Sequence.Key != "" && r.Sequence.PoisonAfter == 0 {
		r.Sequence.PoisonAfter = defaultRouteSequencePoisonAfter
	}
	if r.Lock.Key != "" && r.Lock.Snooze == 0 {
		r.Lock.Snooze = worker.LockSnoozeDefault
	}
}

// MirrorSpec returns the route's mirror spec for a source of provider: its
// own fields over the provider's default. false when it has none.
func (r *RouteConfig) MirrorSpec(provider string) (*effect.Spec, bool) {
	spec, _ := effect.DefaultSpec(provider)
	m := r.Mirror
	spec.Kind = orString(m.Kind, spec.Kind)
	spec.ID = orString(m.ID, spec.ID)
	spec.Version = orString(m.Version, spec.Version)
	spec.EventTime = orString(m.EventTime, spec.EventTime)
	spec.Tie = effect.Tie(orString(m.Tie, string(spec.Tie)))
	if spec.Kind == "" && spec.ID == "" && spec.Version == "" {
		return nil, false
	}
	return &spec, true
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// validateRouteOrdering checks a route's ordering options.
func (c *Config) validateRouteOrdering(p *problems, key string, route *RouteConfig) {
	if _, err := worker.ParseIsolation(route.Isolation); err != nil {
		p.addf(key+".isolation", "%s", err)
	}
	if _, err := effect.ParseTie(route.Mirror.Tie); err != nil {
		p.addf(key+".mirror.tie", "%s", err)
	}
	providers := c.routeProviders(route.Source)
	usesMirror := slices.Contains(route.Handlers, worker.MirrorHandlerName)
	for _, prov := range providers {
		spec, ok := route.MirrorSpec(prov)
		if !usesMirror && route.Sequence.Order != "" {
			continue
		}
		if !ok && (usesMirror || route.Sequence.Key != "") {
			p.addf(key+".mirror", "required for provider %q, which has no default (set kind, id and version)", prov)
			continue
		}
		if ok && usesMirror {
			if err := spec.Validate(); err != nil {
				p.addf(key+".mirror", "for provider %q: %s", prov, err)
			}
		}
	}
	if route.Lock.Snooze < 0 {
		p.addf(key+".lock.snooze", "must not be negative")
	}
	if route.Sequence.Key != "" {
		if route.Sequence.HoldBack < 0 {
			p.addf(key+".sequence.hold_back", "must not be negative")
		}
		if route.Sequence.PoisonAfter < 0 {
			p.addf(key+".sequence.poison_after", "must not be negative")
		}
		iso := orString(route.Isolation, string(c.Worker.Isolation))
		if iso != "" && iso != string(worker.IsolationReadCommitted) {
			p.addf(key+".sequence", "needs isolation read_committed, not %s (set %s.isolation)", iso, key)
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

// WorkerRoute returns the worker.Route of the route, for a source of
// provider (the mirror and sequence defaults depend on it; "" for a route
// over several providers, which then takes no provider default).
func (r *RouteConfig) WorkerRoute(provider string) worker.Route {
	out := worker.Route{Source: r.Source, Types: r.Types, Handlers: r.Handlers, Isolation: worker.Isolation(r.Isolation),
		Filter: r.workerFilter(), Destinations: r.Destinations}
	spec, hasSpec := r.MirrorSpec(provider)
	if hasSpec && r.Mirror != (MirrorConfig{}) {
		out.Mirror = spec
	}
	if r.Lock.Key != "" {
		out.Lock = &worker.LockOption{Key: r.Lock.Key, Snooze: r.Lock.Snooze}
	}
	if r.Sequence.Key != "" {
		order := r.Sequence.Order
		if order == "" && hasSpec {
			order = spec.Version
		}
		out.Sequence = &worker.SequenceOption{Key: r.Sequence.Key, Order: order, HoldBack: r.Sequence.HoldBack,
			PoisonAfter: r.Sequence.PoisonAfter}
	}
	return out
}
