package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// newVerifyCommand is `inboxctl events verify`: run each row's source's
// verifier again over the bytes and headers stored with it, for a dispute
// or an audit.
func newVerifyCommand(path string) *cobra.Command {
	var source, at string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify {ID... | --source S EVENT_ID...} [--at received|now|TIME] [--json]",
		Short: "Verify stored deliveries again and name the secret that signed each",
		Long: `verify runs each row's source's verifier again over the raw body and headers stored
with it, with the secrets the source lists now, and says which one matched by its
position ("secret 1 of 2 (current)": the first listed; "secret 2 of 2 (older)"), never
by its value. Rows are named by inbox id (the ID column of 'events list'), or by event
id with --source.

Signed timestamps are checked with the source's tolerance as of --at: "received" (the
default), the row's received_at, which asks what the receiver asked when the delivery
arrived, so an old row does not fail for its age; "now", the current clock; or an
RFC 3339 time. Basic Auth and API keys are never stored and not checked.

Results: verified; failed (the reason says why: a secret no longer listed, altered
bytes, a timestamp outside the tolerance); erased (its body is gone); unsigned
(reconciled from the provider's API, or a source without a signing secret);
not_found. The exit status is 0 only when every row verified.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			asOf, err := admin.ParseAt(at, time.Now())
			if err != nil {
				return &usageError{errors.New("--" + err.Error())}
			}
			var ids []int64
			if source == "" {
				if ids, err = parseIDs(a); err != nil {
					return err
				}
			}
			adm, done, err := openAdmin(cmd, path, "verify")
			if err != nil {
				return err
			}
			defer done()
			var out []*admin.Verification
			for i, arg := range a {
				var v *admin.Verification
				if source != "" {
					v, err = adm.VerifyEvent(cmd.Context(), source, arg, asOf)
				} else {
					v, err = adm.Verify(cmd.Context(), ids[i], asOf)
				}
				if errors.Is(err, inbox.ErrNotFound) {
					v, err = notFound(source, arg, ids, i), nil
				}
				if err != nil {
					return err
				}
				out = append(out, v)
			}
			if asJSON {
				err = writeJSON(cmd.OutOrStdout(), out)
			} else {
				err = writeVerifications(cmd.OutOrStdout(), out)
			}
			if err != nil {
				return err
			}
			if n := notVerified(out); n > 0 {
				return fmt.Errorf("%d of %s not verified", n, count(int64(len(out)), "event"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&source, "source", "", "name events by their event id in this source, not by inbox id")
	f.StringVar(&at, "at", "received", `check signed timestamps as of "received" (each row's received_at), "now" or an RFC 3339 time`)
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	_ = cmd.RegisterFlagCompletionFunc("at", cobra.FixedCompletions([]string{"received", "now"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// parseIDs reads inbox ids.
func parseIDs(a []string) ([]int64, error) {
	ids := make([]int64, len(a))
	for i, s := range a {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return nil, &usageError{fmt.Errorf("%q is not an inbox id (the ID column of 'events list'); name event ids with --source", s)}
		}
		ids[i] = id
	}
	return ids, nil
}

// notFound is the Verification of a row that does not exist.
func notFound(source, arg string, ids []int64, i int) *admin.Verification {
	if source != "" {
		return &admin.Verification{Source: source, EventID: arg, Result: admin.VerifyNotFound,
			Reason: fmt.Sprintf("no event %q of source %q in the inbox", arg, source)}
	}
	return &admin.Verification{ID: ids[i], Result: admin.VerifyNotFound, Reason: fmt.Sprintf("no inbox row %d", ids[i])}
}

func notVerified(vs []*admin.Verification) int {
	n := 0
	for _, v := range vs {
		if v.Result != admin.VerifyVerified {
			n++
		}
	}
	return n
}

func writeVerifications(w io.Writer, vs []*admin.Verification) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tEVENT_ID\tRESULT\tSECRET\tAS_OF\tREASON")
	for _, v := range vs {
		id, asOf := "-", "-"
		if v.ID != 0 {
			id = strconv.FormatInt(v.ID, 10)
		}
		if !v.AsOf.IsZero() {
			asOf = v.AsOf.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, dash(v.Source), dash(v.EventID), v.Result, dash(v.MatchedSecret),
			asOf, dash(oneLine(v.Reason, 200)))
	}
	return tw.Flush()
}
