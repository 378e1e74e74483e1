package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/operator"
)

// newDoctorCommand is `inboxctl doctor`: what an acknowledged delivery
// survives on the configured database, and whether that meets
// database.durability.require.
func newDoctorCommand(path string) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say what an acknowledged (2xx) delivery survives on the database",
		Long: `doctor reads the server's fsync, full_page_writes, synchronous_commit (as a new session
gets it, and the level the receiver's claim raises it to) and synchronous standbys
(synchronous_standby_names, and how many stream now: "unknown" unless the role may read
pg_stat_replication, as pg_monitor's members may), and says what a 2xx survives: a crash
of a process, a crash of the server's machine, the loss of the server. Replication below
PostgreSQL (RDS Multi-AZ's or Cloud SQL HA's disks, Aurora's storage) is not visible from
here: see docs/deploying.md, "High availability". The exit status is 1 when the server
gives less than database.durability.require.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := boot(cmd.Context(), path, "doctor")
			if err != nil {
				return err
			}
			defer env.Close()
			d, err := operator.ReadDurability(cmd.Context(), env.Pool, env.Config)
			if err != nil {
				return err
			}
			require := env.Config.Database.Durability.Require
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "server\tPostgreSQL %s\n", d.Version)
			fmt.Fprintf(tw, "fsync\t%s\n", d.Fsync)
			fmt.Fprintf(tw, "full_page_writes\t%s\n", d.FullPageWrites)
			fmt.Fprintf(tw, "synchronous_commit\t%s (a new session's); the claim commits at %s\n", d.Session, d.Claim)
			fmt.Fprintf(tw, "synchronous standby\t%s\n", d.StandbyState())
			fmt.Fprintf(tw, "required\t%s (database.durability.require)\n", require)
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), d)
			return d.Meets(require)
		},
	}
}
