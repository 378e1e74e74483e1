package daemon

import (
	"context"
	"fmt"
	"os"

	"github.com/hookinbox/hookinbox/pkg/schema"
)

// Migrate applies River's migrations and env.Sets', and prints what it
// applied. args are the verb's own arguments: there must be none. It tries
// the database once: an unreachable one is an error, not a wait. A
// migration that gave up waiting for a table lock (schema.LockTimeout) is
// retried, logged at warn.
func Migrate(ctx context.Context, env *Env, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("migrate takes no arguments, got %q", args)
	}
	applied, err := schema.Migrate(ctx, env.Pool, &schema.MigrateConfig{Logger: env.Logger}, env.Sets...)
	if err != nil {
		return env.explain(err)
	}
	for _, a := range applied {
		fmt.Fprintf(os.Stdout, "applied %s %04d_%s\n", a.Set, a.Version, a.Name)
	}
	if len(applied) == 0 {
		fmt.Fprintln(os.Stdout, "schema is up to date")
	}
	return nil
}
