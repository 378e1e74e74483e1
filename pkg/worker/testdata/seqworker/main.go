// Command seqworker is cmd/worker with one more handler, "seqlog", which
// records each run of a sequenced event in the seqlog table: the sequencing
// test runs three of it and kills one.
package main

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func main() {
	daemon.Main(func(ctx context.Context, args []string) error {
		env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "worker", Args: args, Verbs: daemon.Verbs{"": config.NeedWorker}})
		if err != nil {
			return err
		}
		defer env.Close()
		registry := worker.NewRegistry(env.Logger)
		registry.Register("seqlog", func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
			s, ok := worker.SequencedFrom(ctx)
			if !ok {
				return errors.New("not sequenced")
			}
			_, err := tx.Exec(ctx, `
INSERT INTO seqlog SELECT p #>> '{data,key}', (p #>> '{data,v}')::int, $2, clock_timestamp(), clock_timestamp()
FROM (SELECT $1::jsonb AS p) AS ev`, string(ev.Payload), s.Late)
			return err
		})
		return daemon.RunWorker(ctx, env, registry)
	})
}
