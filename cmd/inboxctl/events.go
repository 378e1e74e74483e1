package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// newEventsCommand is `inboxctl events`: look up inbox rows, with their
// River job's id and state, to go from an alert to the row and the job.
func newEventsCommand(path string) *cobra.Command {
	events := &cobra.Command{
		Use:   "events",
		Short: "Look up inbox events and their River jobs",
		Args:  args(cobra.NoArgs),
		RunE:  needCommand,
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show SOURCE EVENT_ID",
		Short: "Show one event's row and its River job",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			store, done, err := openStore(cmd, path)
			if err != nil {
				return err
			}
			defer done()
			info, err := store.Lookup(cmd.Context(), a[0], a[1])
			if errors.Is(err, inbox.ErrNotFound) {
				return fmt.Errorf("no event %q of source %q in the inbox", a[1], a[0])
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			return writeDetail(cmd.OutOrStdout(), info)
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")

	var params inboxstore.ListParams
	var status, since, until string
	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first, with their River jobs",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := params
			switch inbox.Status(status) {
			case "", inbox.StatusPending, inbox.StatusDone, inbox.StatusFailed:
				p.Status = inbox.Status(status)
			default:
				return &usageError{fmt.Errorf("--status must be pending, done or failed, not %q", status)}
			}
			if err := setRange(&p, since, until, time.Now()); err != nil {
				return err
			}
			if p.Limit < 0 {
				return &usageError{errors.New("--limit must not be negative")}
			}
			store, done, err := openStore(cmd, path)
			if err != nil {
				return err
			}
			defer done()
			// Relative times count back from the database's clock.
			now, err := store.Now(cmd.Context())
			if err != nil {
				return err
			}
			if err := setRange(&p, since, until, now); err != nil {
				return err
			}
			infos, err := store.List(cmd.Context(), &p)
			if err != nil {
				return err
			}
			if listJSON {
				if infos == nil {
					infos = []inboxstore.EventInfo{}
				}
				return writeJSON(cmd.OutOrStdout(), infos)
			}
			return writeTable(cmd.OutOrStdout(), infos)
		},
	}
	f := list.Flags()
	f.StringVar(&params.Source, "source", "", "only this source's events")
	f.StringVar(&status, "status", "", "only events in this status: pending, done or failed")
	f.StringVar(&params.EventType, "type", "", "only events of this exact type")
	f.StringVar(&since, "since", "", "only events received since then: a duration (1h30m) or an RFC 3339 time")
	f.StringVar(&until, "until", "", "only events received before then: a duration (1h30m) or an RFC 3339 time")
	f.StringVar(&params.ErrorContains, "error", "", "only events whose last error contains this text (ignoring case)")
	f.IntVar(&params.Limit, "limit", 100, "at most this many events")
	f.BoolVar(&listJSON, "json", false, "print JSON instead of a table")
	_ = list.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(
		[]string{string(inbox.StatusPending), string(inbox.StatusDone), string(inbox.StatusFailed)}, cobra.ShellCompDirectiveNoFileComp))

	events.AddCommand(show, list, newPurgeCommand(path), newVerifyCommand(path))
	return events
}

// openStore boots with the config and checks the schema; done releases the
// pool.
func openStore(cmd *cobra.Command, path string) (*inboxstore.Store, func(), error) {
	env, err := boot(cmd.Context(), path, "events")
	if err != nil {
		return nil, nil, err
	}
	if err := env.CheckSchema(cmd.Context()); err != nil {
		env.Close()
		return nil, nil, err
	}
	return inboxstore.New(env.Pool), env.Close, nil
}

// setRange sets p's Since and Until from --since and --until, relative
// times counting back from now.
func setRange(p *inboxstore.ListParams, since, until string, now time.Time) error {
	if since != "" {
		t, err := parseSince(since, now)
		if err != nil {
			return &usageError{err}
		}
		p.Since = t
	}
	if until != "" {
		t, err := parseSince(until, now)
		if err != nil {
			return &usageError{errors.New(strings.Replace(err.Error(), "--since", "--until", 1))}
		}
		p.Until = t
	}
	return nil
}

// parseSince reads --since: a duration before now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since must be a duration (1h30m) or an RFC 3339 time, not %q", s)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func jobColumns(info *inboxstore.EventInfo) (id, state string) {
	id, state = "-", "-"
	if info.JobID != nil {
		id = strconv.FormatInt(*info.JobID, 10)
		state = "pruned"
		if info.JobState != "" {
			state = info.JobState
		}
	}
	return id, state
}

func writeTable(w io.Writer, infos []inboxstore.EventInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tEVENT_ID\tTYPE\tSTATUS\tWAITING\tATTEMPTS\tRECEIVED\tJOB\tJOB_STATE\tREQUEST_ID\tLAST_ERROR")
	for i := range infos {
		info := &infos[i]
		jobID, jobState := jobColumns(info)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", info.ID, info.Source, info.EventID, dash(info.EventType),
			info.Status, dash(info.Waiting), info.Attempts, info.ReceivedAt.UTC().Format(time.RFC3339), jobID, jobState, dash(info.RequestID),
			dash(oneLine(info.LastError, 60)))
	}
	return tw.Flush()
}

func writeDetail(w io.Writer, info *inboxstore.EventInfo) error {
	jobID, jobState := jobColumns(info)
	processed := "-"
	if info.ProcessedAt != nil {
		processed = info.ProcessedAt.UTC().Format(time.RFC3339Nano)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for _, kv := range [][2]string{
		{"id", strconv.FormatInt(info.ID, 10)},
		{"source", info.Source},
		{"provider", info.Provider},
		{"event_id", info.EventID},
		{"event_type", dash(info.EventType)},
		{"status", string(info.Status)},
		{"waiting", dash(info.Waiting)},
		{"attempts", strconv.Itoa(info.Attempts)},
		{"received_at", info.ReceivedAt.UTC().Format(time.RFC3339Nano)},
		{"processed_at", processed},
		{"request_id", dash(info.RequestID)},
		{"job_id", jobID},
		{"job_state", jobState},
		{"last_error", dash(info.LastError)},
		{"note", dash(info.Note)},
		{"failed_at", timeOrDash(info.FailedAt())},
		{"erased_at", timeOrDash(info.ErasedAt)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	fmt.Fprintf(tw, "attempt_errors:\t%d\n", len(info.AttemptErrors))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range info.AttemptErrors {
		fmt.Fprintf(w, "  %s attempt %d: %s\n", e.At.UTC().Format(time.RFC3339), e.Attempt, oneLine(e.Error, 200))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table cell on one line and at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// count is n and noun, plural unless n is 1: "1 event", "2 events".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}
