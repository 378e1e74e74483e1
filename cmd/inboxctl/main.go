// Command inboxctl is hookinbox's operator CLI.
//
//	inboxctl [--config F] migrate          apply hookinbox's and River's migrations
//	inboxctl [--config F] stats [SOURCE]    count inbox rows by status
//	inboxctl [--config F] send --source S --id ID --type T --data JSON [--url U]
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

const usage = `usage: inboxctl [--config F] COMMAND
commands:
  migrate                 apply hookinbox's and River's migrations (idempotent)
  stats [SOURCE]          count inbox rows by status
  send --source S --id ID --type T --data JSON [--url U]
                          sign a delivery with S's first secret and POST it to the receiver`

func main() {
	daemon.Main(run)
}

func run(ctx context.Context, args []string) error {
	// What the config must provide depends on the command: this first load
	// demands nothing (Needs 0) and only finds the command, which loads
	// what it needs.
	_, rest, err := daemon.LoadConfig("inboxctl", args, 0)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return errors.New("no command")
	}
	switch rest[0] {
	case "migrate":
		return daemon.Migrate(ctx, "inboxctl", withoutCommand(args, rest), []*schema.Set{schema.Core()})
	case "send":
		cfg, _, err := daemon.LoadConfig("inboxctl", withoutCommand(args, rest), config.NeedReceiver)
		if err != nil {
			return err
		}
		for _, warning := range cfg.Warnings() {
			fmt.Fprintln(os.Stderr, "inboxctl: warning:", warning)
		}
		return send(ctx, cfg, rest[1:])
	case "stats":
		env, _, err := daemon.Boot(ctx, "inboxctl", withoutCommand(args, rest), config.NeedDatabase, nil, nil)
		if err != nil {
			return err
		}
		defer env.Close()
		source := ""
		if len(rest) > 1 {
			source = rest[1]
		}
		c, err := inbox.InboxCount(ctx, env.Pool, source)
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

// withoutCommand returns the global flags: args minus the command and its
// arguments.
func withoutCommand(args, rest []string) []string {
	return args[:len(args)-len(rest)]
}
