package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/logging"
	"github.com/hookinbox/hookinbox/internal/operator"
)

// openAdmin boots with the config, checks the schema, and returns the
// operator actions with an insert-only River client; done releases the pool.
func openAdmin(cmd *cobra.Command, path, verb string) (*admin.Admin, func(), error) {
	env, err := boot(cmd.Context(), path, verb)
	if err != nil {
		return nil, nil, err
	}
	if err := env.CheckSchema(cmd.Context()); err != nil {
		env.Close()
		return nil, nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(env.Pool), &river.Config{
		Logger: logging.Slog(env.Logger.Named("river")), MaxAttempts: env.Config.Worker.MaxAttempts,
	})
	if err != nil {
		env.Close()
		return nil, nil, fmt.Errorf("river client: %w", err)
	}
	a, err := operator.NewAdmin(env.Pool, env.Config, client)
	if err != nil {
		env.Close()
		return nil, nil, err
	}
	return a, env.Close, nil
}

// newSourcesCommand is `inboxctl sources`: list sources, pause and resume
// one. A paused source's deliveries are still accepted and stored; the
// workers hold its events until it is resumed.
func newSourcesCommand(path string) *cobra.Command {
	sources := &cobra.Command{
		Use:   "sources",
		Short: "List sources; pause and resume one's processing",
		Args:  args(cobra.NoArgs),
		RunE:  needCommand,
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the sources with their pause state and backlog",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, done, err := openAdmin(cmd, path, "sources")
			if err != nil {
				return err
			}
			defer done()
			statuses, err := a.Sources(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), statuses)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE\tPROVIDER\tSTATE\tPENDING\tHELD\tFAILED\tPAUSED_AT\tPAUSED_BY\tREASON")
			for _, s := range statuses {
				state, at := "running", "-"
				if s.Paused {
					state, at = "paused", s.PausedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", s.Name, s.Provider, state, s.Pending, s.Held, s.Failed,
					at, dash(s.PausedBy), dash(oneLine(s.Reason, 60)))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")

	var reason string
	pause := &cobra.Command{
		Use:   "pause SOURCE",
		Short: "Pause a source: deliveries are still stored (2xx), workers hold its events",
		Long: `pause records SOURCE as paused. The receiver keeps accepting and storing its deliveries;
every worker replica holds its events (left pending, no attempt spent) within
worker.pause_refresh, until 'inboxctl sources resume SOURCE'.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, done, err := openAdmin(cmd, path, "sources")
			if err != nil {
				return err
			}
			defer done()
			changed, err := adm.Pause(cmd.Context(), a[0], "inboxctl", reason)
			if err != nil {
				return err
			}
			if !changed {
				fmt.Fprintf(cmd.OutOrStdout(), "%s was already paused\n", a[0])
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "paused %s: its events are held from now on (within worker.pause_refresh)\n", a[0])
			return nil
		},
	}
	pause.Flags().StringVar(&reason, "reason", "", "why, shown by 'sources list'")

	resume := &cobra.Command{
		Use:   "resume SOURCE",
		Short: "Resume a paused source and enqueue its held events",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, done, err := openAdmin(cmd, path, "sources")
			if err != nil {
				return err
			}
			defer done()
			n, err := adm.Resume(cmd.Context(), a[0])
			if errors.Is(err, inboxstore.ErrNotPaused) {
				// Like pause of a paused source: the state asked for holds.
				fmt.Fprintf(cmd.OutOrStdout(), "%s was not paused\n", a[0])
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resumed %s: %s enqueued\n", a[0], count(int64(n), "held event"))
			return nil
		},
	}
	sources.AddCommand(list, pause, resume)
	return sources
}
