package worker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestRouteWithDefaults(t *testing.T) {
	t.Parallel()

	t.Run("FillsTheProviderDefaults", func(t *testing.T) {
		t.Parallel()
		r := worker.Route{Source: "stripe", Handlers: []string{"mirror"}, Mirror: &effect.Spec{ID: "data.object.customer"},
			Lock: &worker.LockOption{Key: "data.object.id"}, Sequence: &worker.SequenceOption{Key: "data.object.customer"}}
		got := r.WithDefaults("stripe")
		require.Equal(t, []string{"*"}, got.Types)
		require.Equal(t, &effect.Spec{Kind: "data.object.object", ID: "data.object.customer", Version: "created", EventTime: "created"}, got.Mirror)
		require.Equal(t, &worker.LockOption{Key: "data.object.id", Snooze: worker.LockSnoozeDefault}, got.Lock)
		require.Equal(t, &worker.SequenceOption{Key: "data.object.customer", Order: "created", PoisonAfter: worker.SequencePoisonAfterDefault}, got.Sequence)
		require.Equal(t, got, got.WithDefaults("stripe"), "idempotent")
		require.Equal(t, &effect.Spec{ID: "data.object.customer"}, r.Mirror, "r itself is left alone")
	})

	t.Run("SectionsWithoutTheirKeyAreNone", func(t *testing.T) {
		t.Parallel()
		r := worker.Route{Source: "*", Mirror: &effect.Spec{}, Lock: &worker.LockOption{Snooze: 1}, Sequence: &worker.SequenceOption{HoldBack: 1}}
		got := r.WithDefaults("")
		require.Nil(t, got.Mirror, "an empty mirror section takes the provider's defaults per event")
		require.Nil(t, got.Lock)
		require.Nil(t, got.Sequence)
	})
}
