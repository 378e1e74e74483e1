// Command inboxctl is hookinbox's operator CLI. --config may come before or
// after the command.
//
//	inboxctl [--config F] migrate          apply hookinbox's and River's migrations
//	inboxctl [--config F] stats [SOURCE]    count inbox rows by status
//	inboxctl [--config F] send --source S [--id ID] [--type T] --data BODY [--url U]
//	                                        sign a delivery as S's provider and POST it
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

const usage = `usage: inboxctl [--config F] COMMAND   (--config F may also follow COMMAND)
commands:
  migrate                 apply hookinbox's and River's migrations (idempotent)
  stats [SOURCE]          count inbox rows by status
  send --source S [--id ID] [--type T] --data BODY [--url U]
                          sign BODY (JSON; for twilio also form parameters) as source S's
                          provider would, with S's first secret and credentials, and POST
                          it to the receiver; --id and --type are required where the
                          provider sends them in headers (send names the missing ones)`

func main() {
	daemon.Main(run)
}

func run(ctx context.Context, args []string) error {
	// migrate and stats need only the database; send signs for a source.
	verbs := daemon.Verbs{"send": config.NeedReceiver}
	env, rest, err := daemon.Boot(ctx, "inboxctl", args, verbs, nil, []*schema.Set{schema.Core()})
	if err != nil {
		return err
	}
	defer env.Close()
	if len(rest) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return errors.New("no command")
	}
	switch rest[0] {
	case "migrate":
		return daemon.Migrate(ctx, env, rest[1:])
	case "send":
		return send(ctx, env.Config, rest[1:])
	case "stats":
		// A clear message, not SQL's, when the database is unreachable
		// or not migrated yet.
		if err := env.CheckSchema(ctx); err != nil {
			return err
		}
		source := ""
		if len(rest) > 1 {
			source = rest[1]
		}
		c, err := inbox.NewStore(env.Pool).Count(ctx, &inbox.Filter{Source: source})
		if err != nil {
			return err
		}
		fmt.Printf("pending %d\ndone %d\nfailed %d\n", c.Pending, c.Done, c.Failed)
		return nil
	default:
		fmt.Fprintln(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", rest[0])
	}
}
