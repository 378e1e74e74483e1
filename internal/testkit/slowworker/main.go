// Command slowworker is cmd/worker with the handlers the fault suite's
// scenario 14 (the worker's promises under load) needs, each of which
// records the events it settles in the test's slow_runs table, in the
// event's transaction, so that a row there is an event that committed:
//
//	record  records the event
//	sleep   records the event after pg_sleep(1), inside the transaction
//	hang    waits until its context ends, and records nothing
//	gate    waits on the advisory lock gateLock, taken shared (the test holds
//	        it exclusively to hold every gate), then records the event
//
// A row holds the event's id, the worker's name (SLOWWORKER_NAME), the
// event's data.key and data.v when its payload has them, and the database's
// clock when its handler began and when it ended. The test creates the table:
//
//	CREATE TABLE slow_runs (event_id text NOT NULL, worker text NOT NULL, key text, v int,
//	                        began timestamptz NOT NULL, ended timestamptz NOT NULL)
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// gateLock is the advisory lock key every gate handler takes shared.
const gateLock = 14

func main() {
	daemon.Main(func(ctx context.Context, args []string) error {
		env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "worker", Args: args, Verbs: daemon.Verbs{"": config.NeedWorker}})
		if err != nil {
			return err
		}
		defer env.Close()
		name := os.Getenv("SLOWWORKER_NAME")
		registry := worker.NewRegistry(env.Logger)
		registry.Register("record", recorder(name, ""))
		registry.Register("sleep", recorder(name, `SELECT pg_sleep(1)`))
		// A group's lock_timeout would end the wait at once: the gate waits
		// for as long as its context lets it.
		registry.Register("gate", recorder(name, `SET LOCAL lock_timeout = 0`, fmt.Sprintf(`SELECT pg_advisory_xact_lock_shared(%d)`, gateLock)))
		registry.Register("hang", func(ctx context.Context, _ pgx.Tx, _ inbox.Event) error {
			<-ctx.Done()
			return ctx.Err()
		})
		return daemon.RunWorker(ctx, env, registry)
	})
}

// recorder returns a handler that runs work in the event's transaction and
// then records the event as settled by the worker name.
func recorder(name string, work ...string) worker.Handler {
	return func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		var began time.Time
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&began); err != nil {
			return err
		}
		for _, sql := range work {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `
INSERT INTO slow_runs (event_id, worker, key, v, began, ended)
SELECT $1, $2, p #>> '{data,key}', (p #>> '{data,v}')::int, $3, clock_timestamp() FROM (SELECT $4::jsonb AS p) AS ev`,
			ev.EventID, name, began, string(ev.Payload))
		return err
	}
}
