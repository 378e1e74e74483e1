package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/logging"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// newReconcileCommand is `inboxctl reconcile`: ask a source's provider
// what it sent in a time range and list what the inbox lacks, or claim it
// (GitHub: have it redelivered) now, as the worker's scheduled job does.
func newReconcileCommand(path string) *cobra.Command {
	var since, until string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "reconcile SOURCE [--since D] [--until D] [--dry-run]",
		Short: "List what a source's provider sent that the inbox lacks, and claim it now (GitHub: redeliver it)",
		Long: `reconcile asks SOURCE's provider API (sources[SOURCE].reconcile) for the events it created
between --since and --until, and lists, one line per event, those the inbox lacks. Without
--dry-run it claims them now (GitHub: asks GitHub to redeliver them), through the code of the
worker's scheduled reconciliation and under the same per-source lock: a run already in progress
makes it fail, never run twice; and it moves the source's watermark forward when its window covers
the scheduled run's (no --until, and --since at or before the watermark less the lookback).
--since and --until are durations before the database's clock (1h30m) or RFC 3339 times; --since
defaults to the scheduled run's start (the watermark less the lookback), --until to now.
--dry-run changes nothing: no claim, no redelivery, no watermark.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			var p inboxstore.ListParams
			// Checks the flags before booting; relative times are resolved
			// against the database's clock below.
			if err := setRange(&p, since, until, time.Now()); err != nil {
				return err
			}
			env, err := boot(cmd.Context(), path, "reconcile")
			if err != nil {
				return err
			}
			defer env.Close()
			if err := checkReconciled(env.Config, a[0]); err != nil {
				return err
			}
			if err := env.CheckSchema(cmd.Context()); err != nil {
				return err
			}
			now, err := inboxstore.New(env.Pool).Now(cmd.Context())
			if err != nil {
				return err
			}
			if err := setRange(&p, since, until, now); err != nil {
				return err
			}
			if !p.Until.IsZero() && p.Until.Before(p.Since) {
				return &usageError{errors.New("--until is before --since")}
			}
			client, err := river.NewClient(riverpgxv5.New(env.Pool), &river.Config{
				Logger: logging.Slog(env.Logger.Named("river")), MaxAttempts: env.Config.Worker.MaxAttempts,
			})
			if err != nil {
				return fmt.Errorf("river client: %w", err)
			}
			w, _, err := operator.NewReconcileWorker(env.Pool, env.Config, env.Logger, client, nil)
			if err != nil {
				return err
			}
			rep, err := w.RunSource(cmd.Context(), a[0], &reconcile.RunParams{Since: p.Since, Until: p.Until, DryRun: dryRun})
			if err != nil {
				return reconcileError(a[0], err)
			}
			return writeReconcile(cmd.OutOrStdout(), a[0], rep, dryRun)
		},
	}
	f := cmd.Flags()
	f.StringVar(&since, "since", "", "list what the provider created since then: a duration (1h30m) or an RFC 3339 time (default: the watermark less the lookback)")
	f.StringVar(&until, "until", "", "list what the provider created until then: a duration (1h30m) or an RFC 3339 time (default: now)")
	f.BoolVar(&dryRun, "dry-run", false, "list what the inbox lacks, change nothing")
	return cmd
}

// checkReconciled checks that the config reconciles source.
func checkReconciled(cfg *config.Config, source string) error {
	i := slices.IndexFunc(cfg.Sources, func(s config.SourceConfig) bool { return s.Name == source })
	if i < 0 {
		names := make([]string, len(cfg.Sources))
		for j, s := range cfg.Sources {
			names[j] = s.Name
		}
		return fmt.Errorf("no source %q in the config (sources: %s)", source, strings.Join(names, ", "))
	}
	s := &cfg.Sources[i]
	switch {
	case !slices.Contains(reconcile.Providers, s.Provider):
		return fmt.Errorf("source %q: provider %s has no reconciliation (providers with one: %s)", source, s.Provider, strings.Join(reconcile.Providers, ", "))
	case !s.Reconcile.Enabled:
		return fmt.Errorf("source %q: reconciliation is not enabled: set sources[%s].reconcile.enabled and its api_key (see docs/operations.md)", source, source)
	}
	return nil
}

// reconcileError says what a failed run means for the operator.
func reconcileError(source string, err error) error {
	var limited *reconcile.RateLimitedError
	switch {
	case errors.Is(err, reconcile.ErrRunning):
		return fmt.Errorf("%s is being reconciled now (the worker's scheduled run, or another inboxctl reconcile); try again when it has finished", source)
	case errors.As(err, &limited):
		return fmt.Errorf("%s: %s rate limited %s; nothing more was asked, the watermark stays: try again after %s",
			source, limited.Provider, limited.Call, limited.Until.UTC().Format(time.RFC3339))
	}
	// The package's prefix is for logs; inboxctl names the source instead.
	return fmt.Errorf("%s: %s", source, strings.TrimPrefix(err.Error(), "reconcile: "))
}

// writeReconcile prints a run: one line per event the inbox lacked, then
// the counts and the watermark.
func writeReconcile(w io.Writer, source string, rep *reconcile.Report, dry bool) error {
	github := rep.Provider == "github"
	action := map[bool]string{false: "claimed", true: "redelivered"}[github]
	if dry {
		action = "would " + map[bool]string{false: "claim", true: "redeliver"}[github]
	}
	until := "now"
	if !rep.Window.Until.IsZero() {
		until = rep.Window.Until.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "%s: listed from %s until %s\n", source, rep.Window.Since.UTC().Format(time.RFC3339), until)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch {
	case len(rep.Missing) == 0 && len(rep.Abandoned) == 0:
	case github:
		fmt.Fprintln(tw, "ACTION\tDELIVERY_GUID\tEVENT\tFIRST_DELIVERED")
	default:
		fmt.Fprintln(tw, "ACTION\tEVENT_ID\tTYPE\tCREATED")
	}
	for _, m := range rep.Missing {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", action, dash(m.ID), dash(m.Type), m.At.UTC().Format(time.RFC3339))
	}
	for _, guid := range rep.Abandoned {
		fmt.Fprintf(tw, "abandoned\t%s\t-\t-\n", guid)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	missing := rep.New
	if github {
		missing = rep.Redelivered + len(rep.Abandoned)
	}
	noun := "event"
	if github {
		noun = "delivery" // GitHub's deliveries, by guid
	}
	fmt.Fprintf(w, "%d %s listed, %d missing from the inbox, %d already in it", rep.Fetched, plural(rep.Fetched, noun), missing, rep.Duplicates)
	if rep.Twins > 0 {
		fmt.Fprintf(w, ", %d twins of events in it", rep.Twins)
	}
	fmt.Fprintln(w)
	if len(rep.Abandoned) > 0 {
		fmt.Fprintf(w, "%d abandoned: GitHub redelivered them in vain; see `inboxctl rejections %s`\n", len(rep.Abandoned), source)
	}
	switch {
	case dry:
		fmt.Fprintln(w, "dry run: nothing claimed or redelivered, the watermark left as it was")
	case !rep.Advanced.IsZero():
		fmt.Fprintf(w, "watermark moved to %s\n", rep.Advanced.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintln(w, "watermark left as it was: the window does not cover the scheduled run's")
	}
	return nil
}

// plural is noun, in the plural unless n is 1: "event", "deliveries".
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return noun
	case strings.HasSuffix(noun, "y"):
		return strings.TrimSuffix(noun, "y") + "ies"
	}
	return noun + "s"
}
