package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// openOutbox boots with the config, checks the schema, and returns the
// outbox's store; done releases the pool.
func openOutbox(cmd *cobra.Command, path string) (*relay.Store, func(), error) {
	env, err := boot(cmd.Context(), path, "outbox")
	if err != nil {
		return nil, nil, err
	}
	if err := env.CheckSchema(cmd.Context()); err != nil {
		env.Close()
		return nil, nil, err
	}
	return relay.NewStore(env.Pool), env.Close, nil
}

// newOutboxCommand is `inboxctl outbox`: list failed outbox messages (and
// disabled destinations), replay them, enable a destination a 410
// disabled.
func newOutboxCommand(path string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "List failed outbox messages, replay them, enable a disabled destination",
		Args:  args(cobra.NoArgs),
		RunE:  needCommand,
	}
	cmd.AddCommand(newOutboxListCommand(path), newOutboxReplayCommand(path), newOutboxEnableCommand(path))
	return cmd
}

func newOutboxListCommand(path string) *cobra.Command {
	var (
		asJSON      bool
		status      string
		destination string
		limit       int
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List failed outbox messages (or --status pending|delivered) and disabled destinations",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, done, err := openOutbox(cmd, path)
			if err != nil {
				return err
			}
			defer done()
			recs, err := store.List(cmd.Context(), &relay.ListParams{Status: outbox.Status(status), Destination: destination, Limit: limit})
			if err != nil {
				return err
			}
			disabled, err := store.Disabled(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"messages": outboxJSON(recs), "disabled_destinations": disabled})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tDESTINATION\tSTATUS\tATTEMPTS\tCREATED_AT\tLAST_ERROR")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.Key, r.Destination, r.Status, r.Attempts,
					r.CreatedAt.UTC().Format(time.RFC3339), dash(oneLine(r.LastError, 80)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, d := range disabled {
				fmt.Fprintf(cmd.OutOrStdout(), "destination %s disabled since %s: %s ('inboxctl outbox enable %s')\n",
					d.Name, d.DisabledAt.UTC().Format(time.RFC3339), oneLine(d.Reason, 80), d.Name)
			}
			return nil
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	list.Flags().StringVar(&status, "status", string(outbox.StatusFailed), "failed, pending or delivered")
	list.Flags().StringVar(&destination, "destination", "", "only this destination's messages")
	list.Flags().IntVar(&limit, "limit", 100, "most messages listed")
	return list
}

// outboxJSON is what `outbox list --json` prints of each message: no
// payload, which may hold personal data.
func outboxJSON(recs []*outbox.Record) []map[string]any {
	out := make([]map[string]any, len(recs))
	for i, r := range recs {
		out[i] = map[string]any{
			"key": r.Key, "destination": r.Destination, "source": r.Source, "event_id": r.EventID, "event_type": r.EventType,
			"status": r.Status, "attempts": r.Attempts, "last_error": r.LastError, "created_at": r.CreatedAt,
			"next_attempt_at": r.NextAttemptAt, "delivered_at": r.DeliveredAt,
		}
	}
	return out
}

func newOutboxReplayCommand(path string) *cobra.Command {
	var destination string
	var all bool
	replay := &cobra.Command{
		Use:   "replay [KEY...]",
		Short: "Put failed outbox messages back to pending: the given keys, or --all (of --destination)",
		Long: `replay sets failed outbox messages back to pending, due at once with their
attempts reset; their history stays. Name the messages by key, or pass --all
(optionally with --destination) to replay every failed message.`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, keys []string) error {
			if len(keys) == 0 && !all {
				return &usageError{errors.New("name the messages' keys, or pass --all")}
			}
			if len(keys) > 0 && all {
				return &usageError{errors.New("give keys or --all, not both")}
			}
			store, done, err := openOutbox(cmd, path)
			if err != nil {
				return err
			}
			defer done()
			n, err := store.Replay(cmd.Context(), &relay.ReplayParams{Keys: keys, Destination: destination})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replayed %s\n", count(n, "failed message"))
			return nil
		},
	}
	replay.Flags().StringVar(&destination, "destination", "", "only this destination's messages")
	replay.Flags().BoolVar(&all, "all", false, "replay every failed message (of --destination)")
	return replay
}

func newOutboxEnableCommand(path string) *cobra.Command {
	return &cobra.Command{
		Use:   "enable DESTINATION",
		Short: "Enable a destination that a 410 Gone disabled; its pending messages go out again",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			store, done, err := openOutbox(cmd, path)
			if err != nil {
				return err
			}
			defer done()
			if err := store.Enable(cmd.Context(), a[0]); errors.Is(err, relay.ErrNotDisabled) {
				return fmt.Errorf("destination %s is not disabled", a[0])
			} else if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "enabled %s: its pending messages are delivered again\n", a[0])
			return nil
		},
	}
}
