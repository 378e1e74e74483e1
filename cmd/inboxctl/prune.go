package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/internal/retention"
)

// newPruneCommand is `inboxctl prune`: apply every source's retention now,
// as the worker's periodic job does, or count what it would do.
func newPruneCommand(path string) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune [--dry-run]",
		Short: "Delete done rows past their source's retention and erase payloads past payload_retention",
		Long: `prune applies each source's retention now, in small batches, as the worker's retention job does
every worker.prune_interval. Failed rows are never deleted. --dry-run counts, changing nothing.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := boot(cmd.Context(), path, "prune")
			if err != nil {
				return err
			}
			defer env.Close()
			if err := env.CheckSchema(cmd.Context()); err != nil {
				return err
			}
			pruner := retention.NewPruner(inboxstore.New(env.Pool), &retention.Config{
				Policies: operator.RetentionPolicies(env.Config), Batch: env.Config.Worker.PruneBatch, Logger: env.Logger.Named("retention"),
			})
			run := pruner.Run
			if dryRun {
				run = pruner.DryRun
			}
			results, err := run(cmd.Context())
			if werr := writePrune(cmd.OutOrStdout(), results, dryRun); werr != nil && err == nil {
				err = werr
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be deleted and erased, change nothing")
	return cmd
}

func writePrune(w io.Writer, results []retention.SourceResult, dry bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	verbs := "DELETED\tERASED"
	if dry {
		verbs = "WOULD_DELETE\tWOULD_ERASE"
	}
	fmt.Fprintf(tw, "SOURCE\tOLDER_THAN\t%s\n", verbs)
	for _, r := range results {
		age := "-"
		if r.Retention > 0 {
			age = r.Retention.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.Source, age, r.Deleted, r.Erased)
	}
	return tw.Flush()
}

// newPurgeCommand is `inboxctl events purge`: erase chosen rows' data for
// an erasure request.
func newPurgeCommand(path string) *cobra.Command {
	var f selectionFlags
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge [EVENT_ID...] --source S [--type T] [--status S] [--since D] [--until D] [--error TEXT] [--yes]",
		Short: "Erase chosen events' body, headers, payload and errors (an erasure request), keeping their keys",
		Long: `purge erases the body, headers, payload, errors and note of the events chosen by EVENT_IDs
(of --source) or by filters, failed ones included, keeping each row's keys so that a redelivery
of the event is still recognised as a duplicate. A pending event becomes failed and is never run.
It asks for confirmation unless --yes is given, and logs each erased row's identity, never its data.`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			if f.source == "" {
				return &usageError{errors.New("--source is required")}
			}
			// Checks the flags before booting; relative times are resolved
			// against the database's clock below.
			if _, err := f.selection(time.Now(), a); err != nil {
				return err
			}
			if len(a) == 0 && f.eventType == "" && f.since == "" && f.until == "" && f.errText == "" && len(f.statuses) == 0 {
				return &usageError{errors.New("name EVENT_IDs or a filter (--type, --status, --since, --until, --error): purge never erases a whole source by default")}
			}
			env, err := boot(cmd.Context(), path, "purge")
			if err != nil {
				return err
			}
			defer env.Close()
			if err := env.CheckSchema(cmd.Context()); err != nil {
				return err
			}
			store := inboxstore.New(env.Pool)
			sel, err := f.resolve(cmd.Context(), store, a)
			if err != nil {
				return err
			}
			n, err := store.CountSelected(cmd.Context(), sel)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if n == 0 {
				fmt.Fprintln(out, "no event to erase")
				return nil
			}
			if !yes && !confirm(cmd.InOrStdin(), out, fmt.Sprintf("erase the data of %s of source %s? type yes: ", count(n, "event"), sel.Source)) {
				return errors.New("not confirmed; nothing erased")
			}
			erased, err := store.Purge(cmd.Context(), sel)
			if err != nil {
				return err
			}
			for _, r := range erased {
				env.Logger.Info("event erased", zap.Int64("inbox_id", r.ID), zap.String("source", r.Source),
					zap.String("event_id", r.EventID), zap.String("status", string(r.Status)))
			}
			fmt.Fprintf(out, "erased %s\n", count(int64(len(erased)), "event"))
			return nil
		},
	}
	f.register(cmd, "only events in these statuses: pending, done, failed")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation (for scripts)")
	return cmd
}

// confirm asks question and reports whether the answer is "yes".
func confirm(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprint(out, question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	return strings.TrimSpace(line) == "yes"
}
