// Command ledger is an example worker binary built on hookinbox's packages.
// It applies account.deposit events from a Standard Webhooks source to a
// deposit ledger, effectively once.
//
//	ledger migrate --config F   apply the core migrations, River's and the ledger's
//	ledger --config F           run the worker (route events to the "ledger" handler)
//
// --config may come before or after the verb.
package main

import (
	"context"
	"fmt"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/schema"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func main() {
	daemon.Main(run)
}

func run(ctx context.Context, args []string) error {
	sets := []*schema.Set{schema.Core(), Migrations()}
	env, rest, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "ledger", Args: args, Verbs: daemon.Verbs{"": config.NeedWorker}, Sets: sets})
	if err != nil {
		return err
	}
	defer env.Close()
	switch {
	case len(rest) == 0:
		registry := worker.NewRegistry(env.Logger)
		registry.Register("ledger", Deposit)
		return daemon.RunWorker(ctx, env, registry)
	case rest[0] == "migrate":
		return daemon.Migrate(ctx, env, rest[1:])
	default:
		return fmt.Errorf("unknown command %q (use: ledger [migrate] [--config F])", rest[0])
	}
}
