package daemon

import (
	"context"
	"fmt"
	"os"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// Migrate loads the config from args, applies River's migrations and the
// sets', and prints what it applied.
func Migrate(ctx context.Context, name string, args []string, sets []*schema.Set) error {
	env, rest, err := Boot(ctx, name, args, config.NeedDatabase, nil, nil)
	if err != nil {
		return err
	}
	defer env.Close()
	if len(rest) > 0 {
		return fmt.Errorf("migrate takes no arguments, got %q", rest)
	}
	applied, err := schema.Migrate(ctx, env.Pool, sets...)
	if err != nil {
		return err
	}
	for _, a := range applied {
		fmt.Fprintf(os.Stdout, "applied %s %04d_%s\n", a.Set, a.Version, a.Name)
	}
	if len(applied) == 0 {
		fmt.Fprintln(os.Stdout, "schema is up to date")
	}
	return nil
}
