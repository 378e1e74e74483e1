// Command worker works hookinbox's inbox events with River, running the
// handlers the config's routes name (the built-ins: noop and log). To run
// your own handlers, build a worker binary on pkg/worker and pkg/daemon as
// examples/ledger does.
//
//	worker --config config/hookinbox.yaml
package main

import (
	"context"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

func main() {
	daemon.Main(func(ctx context.Context, args []string) error {
		env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "worker", Args: args, Verbs: daemon.Verbs{"": config.NeedWorker}})
		if err != nil {
			return err
		}
		defer env.Close()
		return daemon.RunWorker(ctx, env, nil)
	})
}
