package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestRouteOrdering(t *testing.T) {
	t.Parallel()

	t.Run("RefusesBadOptionsByKey", func(t *testing.T) {
		t.Parallel()
		for want, mutate := range map[string]func(r *worker.Route, c *Config){
			"worker.routes[0].isolation":             func(r *worker.Route, _ *Config) { r.Isolation = "snapshot" },
			"worker.isolation":                       func(_ *worker.Route, c *Config) { c.Worker.Isolation = "chaos" },
			"worker.routes[0].mirror.tie":            func(r *worker.Route, _ *Config) { r.Mirror = &effect.Spec{Tie: "newest"} },
			"worker.routes[0].mirror":                func(r *worker.Route, _ *Config) { r.Source = "bank"; r.Handlers = []string{"mirror"} },
			"worker.routes[0].sequence.hold_back":    func(r *worker.Route, _ *Config) { r.Sequence = &worker.SequenceOption{Key: "data.id", HoldBack: -1} },
			"worker.routes[0].sequence.poison_after": func(r *worker.Route, _ *Config) { r.Sequence = &worker.SequenceOption{Key: "data.id", PoisonAfter: -1} },
			"worker.routes[0].lock.snooze":           func(r *worker.Route, _ *Config) { r.Lock = &worker.LockOption{Key: "data.id", Snooze: -1} },
			"worker.routes[0].sequence": func(r *worker.Route, _ *Config) {
				r.Sequence = &worker.SequenceOption{Key: "data.id"}
				r.Isolation = "serializable"
			},
		} {
			cfg := validConfig()
			mutate(&cfg.Worker.Routes[0], cfg)
			err := cfg.Validate()
			require.ErrorContains(t, err, want+":", want)
		}
	})

	t.Run("MirrorFieldsOverTheProviderDefault", func(t *testing.T) {
		t.Parallel()
		r := worker.Route{Mirror: &effect.Spec{ID: "data.object.customer", Tie: "keep_first"}}
		spec, ok := r.MirrorSpec("stripe")
		require.True(t, ok)
		require.Equal(t, &effect.Spec{Kind: "data.object.object", ID: "data.object.customer", Version: "created",
			EventTime: "created", Tie: effect.TieKeepFirst}, spec)
		_, ok = r.MirrorSpec("github")
		require.True(t, ok, "a partial spec is still a spec; Validate names what it lacks")
		_, ok = (&worker.Route{}).MirrorSpec("github")
		require.False(t, ok)
	})

	t.Run("WorkerRouteTakesTheOrderFromTheMirror", func(t *testing.T) {
		t.Parallel()
		cfg := validConfig()
		cfg.Worker.Routes[0].Sequence = &worker.SequenceOption{Key: "data.object.customer"}
		cfg.Worker.Routes[0].Lock = &worker.LockOption{Key: "data.object.id"}
		cfg.ApplyDefaults()
		require.NoError(t, cfg.Validate())
		r := cfg.Worker.Routes[0]
		require.Equal(t, &worker.SequenceOption{Key: "data.object.customer", Order: "created", PoisonAfter: worker.SequencePoisonAfterDefault}, r.Sequence)
		require.Equal(t, &worker.LockOption{Key: "data.object.id", Snooze: worker.LockSnoozeDefault}, r.Lock)
		require.Nil(t, r.Mirror, "no mirror keys set: the handler takes the provider's default itself")
	})
}
