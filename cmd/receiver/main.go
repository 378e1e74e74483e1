// Command receiver is hookinbox's webhook receiver: it verifies each
// delivery's signature, claims its events in the inbox with their River jobs
// in one transaction, and acknowledges only after the commit.
//
//	receiver --config config/hookinbox.yaml
package main

import (
	"context"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

func main() {
	daemon.Main(func(ctx context.Context, args []string) error {
		env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "receiver", Args: args, Verbs: daemon.Verbs{"": config.NeedReceiver}})
		if err != nil {
			return err
		}
		defer env.Close()
		return daemon.RunReceiver(ctx, env)
	})
}
