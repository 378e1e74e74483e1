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
	"github.com/hookinbox/hookinbox/pkg/schema"
)

func main() {
	daemon.Main(func(ctx context.Context, args []string) error {
		env, _, err := daemon.Boot(ctx, "receiver", args, daemon.Verbs{"": config.NeedReceiver}, nil, []*schema.Set{schema.Core()})
		if err != nil {
			return err
		}
		defer env.Close()
		return daemon.RunReceiver(ctx, env)
	})
}
