package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/internal/replay"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// selectionFlags are the flags that choose inbox rows for replay and purge.
type selectionFlags struct {
	source, eventType, since, until, errText string
	statuses                                 []string
}

func (f *selectionFlags) register(cmd *cobra.Command, statusHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&f.source, "source", "", "only this source's events")
	fl.StringVar(&f.eventType, "type", "", "only events of this exact type")
	fl.StringSliceVar(&f.statuses, "status", nil, statusHelp)
	fl.StringVar(&f.since, "since", "", "only events received since then: a duration (1h30m) or an RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "only events received before then: a duration (1h30m) or an RFC 3339 time")
	fl.StringVar(&f.errText, "error", "", "only events whose last error contains this text (ignoring case)")
}

// selection builds the Selection, answering a usage error for bad values.
func (f *selectionFlags) selection(now time.Time, eventIDs []string) (*inboxstore.Selection, error) {
	sel := &inboxstore.Selection{Source: f.source, EventType: f.eventType, ErrorContains: f.errText, EventIDs: eventIDs}
	for _, s := range f.statuses {
		sel.Statuses = append(sel.Statuses, inbox.Status(s))
	}
	var err error
	if f.since != "" {
		if sel.Since, err = parseSince(f.since, now); err != nil {
			return nil, &usageError{err}
		}
	}
	if f.until != "" {
		if sel.Until, err = parseSince(f.until, now); err != nil {
			return nil, &usageError{fmt.Errorf("--until%s", err.Error()[len("--since"):])}
		}
	}
	if err := sel.Validate(); err != nil {
		return nil, &usageError{err}
	}
	return sel, nil
}

// resolve builds the Selection with relative times (--since 1h) counted
// back from the database's clock, which stamps received_at, not from the
// clock of the machine inboxctl runs on.
func (f *selectionFlags) resolve(ctx context.Context, store *inboxstore.Store, eventIDs []string) (*inboxstore.Selection, error) {
	now, err := store.Now(ctx)
	if err != nil {
		return nil, err
	}
	return f.selection(now, eventIDs)
}

// newReplayCommand is `inboxctl replay`: run handlers again, for one event
// or as a bulk replay job.
func newReplayCommand(path string) *cobra.Command {
	var f selectionFlags
	var dryRun, yes bool
	var rate, batch int
	cmd := &cobra.Command{
		Use:   "replay [SOURCE EVENT_ID] [--source S] [--type T] [--status failed,done] [--since D] [--until D] [--error TEXT] [--dry-run] [--yes]",
		Short: "Process events again: one at once, or many as a rate-limited, cancellable bulk replay",
		Long: `replay SOURCE EVENT_ID puts that event's row back to pending with a new job, at once.
With filters instead, it starts a bulk replay: a River job the worker runs in batches at --rate
rows per second (default worker.replay_rate), behind live traffic; follow it with
'replay status', stop it with 'replay cancel ID', continue it with 'replay resume ID'.
--status defaults to failed; done rows are replayed with --status done (a fixed bug).
Without a filter (--source, --type, --since, --until or --error) it asks for confirmation,
unless --yes is given; a selection that matches nothing starts nothing.
No row is ever inserted: the handlers must be idempotent, as they already are for retries.`,
		Args: args(func(cmd *cobra.Command, a []string) error {
			if len(a) != 0 && len(a) != 2 {
				return errors.New("replay takes SOURCE EVENT_ID, or filters and no arguments")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(f.statuses) == 0 {
				f.statuses = []string{string(inbox.StatusFailed)}
			}
			if _, err := f.selection(time.Now(), nil); err != nil {
				return err
			}
			if rate < 0 || batch < 0 {
				return &usageError{errors.New("--rate and --batch must be positive")}
			}
			env, m, err := openReplay(cmd, path)
			if err != nil {
				return err
			}
			defer env.Close()
			out := cmd.OutOrStdout()
			if len(a) == 2 {
				return replayOne(cmd, m, a[0], a[1], dryRun, out)
			}
			sel, err := f.resolve(cmd.Context(), inboxstore.New(env.Pool), nil)
			if err != nil {
				return err
			}
			n, err := m.DryRun(cmd.Context(), sel)
			if err != nil {
				return err
			}
			switch {
			case dryRun:
				fmt.Fprintf(out, "would replay %s (dry run; nothing changed)\n", count(n, "event"))
				return nil
			case n == 0:
				fmt.Fprintln(out, "no event matches; no replay started")
				return nil
			case !sel.Narrows() && !yes && !confirm(cmd.InOrStdin(), out,
				fmt.Sprintf("no filter names a source, a type, a time range or an error: replay all %d %s events of every source? type yes: ",
					n, strings.Join(f.statuses, " or "))):
				return errors.New("not confirmed; no replay started (name a filter, or pass --yes)")
			}
			run, err := m.Start(cmd.Context(), &replay.StartParams{Selection: *sel, Rate: rate, Batch: batch})
			if errors.Is(err, replay.ErrNothingToReplay) {
				fmt.Fprintln(out, "no event matches; no replay started")
				return nil
			}
			if err != nil {
				return err
			}
			env.Logger.Info("bulk replay started", zap.Int64("replay_run", run.ID), zap.Int64("total", run.Total))
			fmt.Fprintf(out, "replay %d started: %s at %d/s; follow it with 'inboxctl replay status %d'\n", run.ID, count(run.Total, "event"), run.Rate, run.ID)
			return nil
		},
	}
	f.register(cmd, "only events in these statuses: failed, done (default failed)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be replayed, change nothing")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation of a replay without a filter (for scripts)")
	cmd.Flags().IntVar(&rate, "rate", 0, "rows per second (default worker.replay_rate)")
	cmd.Flags().IntVar(&batch, "batch", 0, "rows per transaction (default worker.replay_batch)")

	cmd.AddCommand(&cobra.Command{
		Use:   "status [ID]",
		Short: "Show a bulk replay's progress, or list the recent ones",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			env, m, err := openReplay(cmd, path)
			if err != nil {
				return err
			}
			defer env.Close()
			if len(a) == 0 {
				runs, err := m.List(cmd.Context(), 20)
				if err != nil {
					return err
				}
				return writeRuns(cmd.OutOrStdout(), runs)
			}
			run, err := getRun(cmd, m, a[0], (*replay.Manager).Get)
			if err != nil {
				return err
			}
			return writeRuns(cmd.OutOrStdout(), []replay.Run{*run})
		},
	})
	for _, verb := range []struct {
		name, short string
		do          func(*replay.Manager, *cobra.Command, int64) (*replay.Run, error)
	}{
		{"cancel", "Stop a bulk replay; rows replayed so far stay replayed", func(m *replay.Manager, c *cobra.Command, id int64) (*replay.Run, error) {
			return m.Cancel(c.Context(), id)
		}},
		{"resume", "Continue a cancelled bulk replay where it stopped", func(m *replay.Manager, c *cobra.Command, id int64) (*replay.Run, error) {
			return m.Resume(c.Context(), id)
		}},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   verb.name + " ID",
			Short: verb.short,
			Args:  args(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				env, m, err := openReplay(cmd, path)
				if err != nil {
					return err
				}
				defer env.Close()
				run, err := getRun(cmd, m, a[0], func(m *replay.Manager, _ context.Context, id int64) (*replay.Run, error) {
					return verb.do(m, cmd, id)
				})
				if err != nil {
					return err
				}
				env.Logger.Info("bulk replay "+verb.name, zap.Int64("replay_run", run.ID))
				return writeRuns(cmd.OutOrStdout(), []replay.Run{*run})
			},
		})
	}
	return cmd
}

func replayOne(cmd *cobra.Command, m *replay.Manager, source, eventID string, dryRun bool, out io.Writer) error {
	if dryRun {
		n, err := m.DryRun(cmd.Context(), &inboxstore.Selection{Source: source, EventIDs: []string{eventID}})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "would replay %s (dry run; nothing changed)\n", count(n, "event"))
		return nil
	}
	row, err := m.ReplayEvent(cmd.Context(), source, eventID)
	switch {
	case errors.Is(err, inbox.ErrNotFound):
		return fmt.Errorf("no event %q of source %q in the inbox", eventID, source)
	case errors.Is(err, inboxstore.ErrNotReplayable):
		return fmt.Errorf("event %q of source %q is pending or erased; only done and failed events with their payload can be replayed", eventID, source)
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "replayed %s %s (row %d): pending with a new job\n", source, eventID, row.ID)
	return nil
}

func openReplay(cmd *cobra.Command, path string) (*daemon.Env, *replay.Manager, error) {
	env, err := boot(cmd.Context(), path, "replay")
	if err != nil {
		return nil, nil, err
	}
	if err := env.CheckSchema(cmd.Context()); err != nil {
		env.Close()
		return nil, nil, err
	}
	m, err := operator.NewReplayManager(env.Pool, env.Config, env.Logger)
	if err != nil {
		env.Close()
		return nil, nil, err
	}
	return env, m, nil
}

func getRun(cmd *cobra.Command, m *replay.Manager, arg string, do func(*replay.Manager, context.Context, int64) (*replay.Run, error)) (*replay.Run, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return nil, &usageError{fmt.Errorf("a replay ID is a positive number, not %q", arg)}
	}
	run, err := do(m, cmd.Context(), id)
	if errors.Is(err, replay.ErrNotFound) {
		return nil, fmt.Errorf("no replay %d", id)
	}
	return run, err
}

func writeRuns(w io.Writer, runs []replay.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tREPLAYED\tTOTAL\tRATE\tCREATED\tUPDATED\tSELECTION")
	for _, r := range runs {
		sel, _ := json.Marshal(r.Selection)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d/s\t%s\t%s\t%s\n", r.ID, r.State, r.Replayed, r.Total, r.Rate,
			r.CreatedAt.UTC().Format(time.RFC3339), r.UpdatedAt.UTC().Format(time.RFC3339), sel)
	}
	return tw.Flush()
}
