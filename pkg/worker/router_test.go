package worker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestCheckRoutes(t *testing.T) {
	t.Parallel()
	sources := map[string]string{"stripe": "default", "bank": "bank", "shop": "default"}

	t.Run("CatchAllCoversEverySource", func(t *testing.T) {
		t.Parallel()
		warnings, err := worker.CheckRoutes([]worker.Route{
			{Source: "stripe", Types: []string{"payment_intent.*"}, Handlers: []string{"log"}},
			{Source: "*", Handlers: []string{"noop"}},
		}, sources, []string{"default", "bank"})
		require.NoError(t, err)
		require.Empty(t, warnings)
	})

	t.Run("SourceOnAWorkedQueueWithoutARouteIsRefused", func(t *testing.T) {
		t.Parallel()
		_, err := worker.CheckRoutes([]worker.Route{
			{Source: "bank", Types: []string{"account.deposit"}, Handlers: []string{"ledger"}},
		}, sources, []string{"default", "bank"})
		require.EqualError(t, err,
			`worker.routes: no route for source "shop", whose events go to queue "default" (worker.queues); add a route or stop working that queue`+"\n"+
				`worker.routes: no route for source "stripe", whose events go to queue "default" (worker.queues); add a route or stop working that queue`)
	})

	t.Run("NoRoutesAtAllIsRefused", func(t *testing.T) {
		t.Parallel()
		_, err := worker.CheckRoutes(nil, sources, []string{"bank"})
		require.EqualError(t, err,
			`worker.routes: no route for source "bank", whose events go to queue "bank" (worker.queues); add a route or stop working that queue`)
	})

	t.Run("SourcesOnOtherQueuesNeedNoRoute", func(t *testing.T) {
		t.Parallel()
		warnings, err := worker.CheckRoutes([]worker.Route{
			{Source: "bank", Handlers: []string{"ledger"}},
		}, sources, []string{"bank"})
		require.NoError(t, err)
		require.Empty(t, warnings)
	})

	t.Run("UnknownSourceIsRefused", func(t *testing.T) {
		t.Parallel()
		_, err := worker.CheckRoutes([]worker.Route{
			{Source: "bnak", Handlers: []string{"ledger"}},
			{Source: "*", Handlers: []string{"noop"}},
		}, sources, []string{"bank"})
		require.EqualError(t, err, `worker.routes[0].source: unknown source "bnak"`)
	})

	t.Run("RouteThatCanNeverRunHereIsAWarning", func(t *testing.T) {
		t.Parallel()
		warnings, err := worker.CheckRoutes([]worker.Route{
			{Source: "bank", Handlers: []string{"ledger"}},
			{Source: "stripe", Handlers: []string{"log"}},
		}, sources, []string{"bank"})
		require.NoError(t, err)
		require.Equal(t, []string{
			`worker.routes[1] can never run here: source "stripe"'s events go to queue "default", which this worker does not work (worker.queues)`,
		}, warnings)
	})

	t.Run("QueueNoSourceUsesIsAWarning", func(t *testing.T) {
		t.Parallel()
		warnings, err := worker.CheckRoutes([]worker.Route{
			{Source: "bank", Handlers: []string{"ledger"}},
		}, sources, []string{"bank", "spare"})
		require.NoError(t, err)
		require.Equal(t, []string{
			`worker.queues: no source uses queue "spare" (sources[].queue); this worker finds no events there`,
		}, warnings)
	})
}
