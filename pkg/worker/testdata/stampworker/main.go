// Command stampworker is cmd/worker with two more handlers, "stamp_v1" and
// "stamp_v2", which record each event they settle in the stamps table with
// their own name and the process's id: the route change test runs one
// worker routed to each and checks who settled what. Each first takes the
// shared advisory lock stampHold, so that a test holding it exclusively
// holds every handler in flight.
package main

import (
	"context"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// stampHold is the advisory lock key every stamp takes shared.
const stampHold = 28

func main() {
	daemon.Main(func(ctx context.Context, args []string) error {
		env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "worker", Args: args, Verbs: daemon.Verbs{"": config.NeedWorker}})
		if err != nil {
			return err
		}
		defer env.Close()
		registry := worker.NewRegistry(env.Logger)
		registry.Register("stamp_v1", stamp("stamp_v1"))
		registry.Register("stamp_v2", stamp("stamp_v2"))
		return daemon.RunWorker(ctx, env, registry)
	})
}

// stamp returns a handler that records the event as settled by name.
func stamp(name string) worker.Handler {
	pid := os.Getpid()
	return func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, stampHold); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO stamps (event_id, source, handler, pid, at) VALUES ($1, $2, $3, $4, clock_timestamp())`,
			ev.EventID, ev.Source, name, pid)
		return err
	}
}
