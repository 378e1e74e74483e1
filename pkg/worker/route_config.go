package worker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/effect"
)

// WithDefaults returns a copy of r, an entry of the worker: section's
// routes, with its documented defaults filled in: Types ["*"], a lock's
// Snooze and a sequence's PoisonAfter, and what depends on the provider of
// its source (provider is "" for a route over every source, which then takes
// no provider default): a mirror section's empty fields from the provider's
// spec, and a sequence's Order from that spec's version. A lock or sequence
// section without a key is no lock or sequence. It is idempotent.
func (r Route) WithDefaults(provider string) Route {
	if len(r.Types) == 0 {
		r.Types = []string{"*"}
	}
	spec, hasSpec := r.MirrorSpec(provider)
	switch {
	case r.Mirror == nil:
	case *r.Mirror == effect.Spec{}:
		r.Mirror = nil // An empty section: the provider's defaults.
	case hasSpec:
		r.Mirror = spec
	}
	if r.Lock != nil {
		l := *r.Lock
		l.Snooze = cmp.Or(l.Snooze, LockSnoozeDefault)
		r.Lock = &l
		if l.Key == "" {
			r.Lock = nil
		}
	}
	if r.Sequence != nil {
		s := *r.Sequence
		if s.Order == "" && hasSpec {
			s.Order = spec.Version
		}
		s.PoisonAfter = cmp.Or(s.PoisonAfter, SequencePoisonAfterDefault)
		r.Sequence = &s
		if s.Key == "" {
			r.Sequence = nil
		}
	}
	return r
}

// MirrorSpec returns the route's mirror spec for a source of provider: its
// own fields over the provider's default (effect.DefaultSpec); false when
// neither locates a kind, an id or a version.
func (r *Route) MirrorSpec(provider string) (*effect.Spec, bool) {
	spec, _ := effect.DefaultSpec(provider)
	if m := r.Mirror; m != nil {
		spec.Kind = cmp.Or(m.Kind, spec.Kind)
		spec.ID = cmp.Or(m.ID, spec.ID)
		spec.Version = cmp.Or(m.Version, spec.Version)
		spec.EventTime = cmp.Or(m.EventTime, spec.EventTime)
		spec.Tie = cmp.Or(m.Tie, spec.Tie)
	}
	if spec.Kind == "" && spec.ID == "" && spec.Version == "" {
		return nil, false
	}
	return &spec, true
}

// validate checks r, the route at key ("routes[2]") of a Config whose
// isolation is iso and whose earlier routes are earlier, and returns its
// problems joined, each starting with its key ("routes[2].sequence.key: …").
// What depends on other sections (the source's name and provider, the
// destinations) is pkg/config's to check.
func (r *Route) validate(key string, iso Isolation, earlier []Route) error {
	var errs []error
	add := func(k, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", k, fmt.Sprintf(format, args...)))
	}
	if r.Source == "" {
		add(key+".source", `required (a source name, or "*" for any)`)
	}
	if r.Types != nil && len(r.Types) == 0 {
		add(key+".types", "at least one type pattern is required")
	}
	for j, pattern := range r.Types {
		if err := checkTypePattern(pattern); err != nil {
			add(fmt.Sprintf("%s.types[%d]", key, j), "%s", err)
		}
	}
	if len(r.Handlers) == 0 {
		add(key+".handlers", "at least one handler is required")
	}
	for j, handler := range r.Handlers {
		if strings.TrimSpace(handler) == "" {
			add(fmt.Sprintf("%s.handlers[%d]", key, j), "must not be empty")
		}
	}
	if _, err := ParseIsolation(string(r.Isolation)); err != nil {
		add(key+".isolation", "%s", err)
	}
	if r.Mirror != nil {
		if _, err := effect.ParseTie(string(r.Mirror.Tie)); err != nil {
			add(key+".mirror.tie", "%s", err)
		}
	}
	if r.Lock != nil && r.Lock.Snooze < 0 {
		add(key+".lock.snooze", "must not be negative")
	}
	if s := r.Sequence; s != nil && s.Key != "" {
		if s.HoldBack < 0 {
			add(key+".sequence.hold_back", "must not be negative")
		}
		if s.PoisonAfter < 0 {
			add(key+".sequence.poison_after", "must not be negative")
		}
		// The sequence check reads what the key's previous event committed
		// while this transaction waited for the key: only READ COMMITTED,
		// with a snapshot per statement, sees it.
		if level := cmp.Or(r.Isolation, iso); level != "" && level != IsolationReadCommitted {
			add(key+".sequence", "needs isolation %s, not %s (set worker.%s.isolation)", IsolationReadCommitted, level, key)
		}
	}
	for i, f := range r.Filter {
		if err := inboxstore.CheckSequenceLocator(f.Path); err != nil {
			add(fmt.Sprintf("%s.filter[%d].path", key, i), "%s", err)
		}
	}
	if slices.Contains(r.Handlers, ForwardHandlerName) && len(r.Destinations) == 0 {
		add(key+".destinations", "required by the forward handler: names in worker.destinations")
	}
	// The first match decides, so a route after a catch-all for its source
	// can never run.
	for j, e := range earlier {
		if (e.Source == "*" || e.Source == r.Source) && slices.Contains(e.Types, "*") {
			add(key, "unreachable: worker.routes[%d] already matches every event of source %q", j, r.Source)
			break
		}
	}
	return errors.Join(errs...)
}

// checkTypePattern accepts "*", an exact type, or a prefix ending in ".*".
func checkTypePattern(pattern string) error {
	const want = `must be "*", an exact event type, or a prefix ending in ".*"`
	switch {
	case pattern == "*":
		return nil
	case strings.TrimSpace(pattern) == "":
		return errors.New("must not be empty")
	case strings.ContainsAny(pattern, " \t\r\n"):
		return fmt.Errorf("%q contains whitespace", pattern)
	case strings.HasSuffix(pattern, ".*"):
		prefix := strings.TrimSuffix(pattern, ".*")
		if prefix == "" || strings.Contains(prefix, "*") {
			return fmt.Errorf("%q: %s", pattern, want)
		}
		return nil
	case strings.Contains(pattern, "*"):
		return fmt.Errorf("%q: %s", pattern, want)
	default:
		return nil
	}
}
