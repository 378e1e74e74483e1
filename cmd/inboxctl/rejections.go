package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/rejection"
)

// newRejectionsCommand is `inboxctl rejections SOURCE`: the source's last
// refused deliveries, with their headers redacted, to debug a failed
// secret rotation without debug logs.
func newRejectionsCommand(path string) *cobra.Command {
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "rejections SOURCE",
		Short: "Show a source's last refused deliveries (reason, address, redacted headers)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if limit < 0 {
				return &usageError{fmt.Errorf("--limit must not be negative")}
			}
			adm, done, err := openAdmin(cmd, path, "rejections")
			if err != nil {
				return err
			}
			defer done()
			samples, err := adm.Rejections(cmd.Context(), a[0], limit)
			if err != nil {
				return err
			}
			if asJSON {
				if samples == nil {
					samples = []rejection.Sample{}
				}
				return writeJSON(cmd.OutOrStdout(), samples)
			}
			if len(samples) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no rejection of %s recorded\n", a[0])
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REJECTED_AT\tSTATUS\tREASON\tREMOTE_ADDR\tREQUEST_ID\tHEADERS")
			for _, s := range samples {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", s.RejectedAt.UTC().Format(time.RFC3339), s.Status, s.Reason,
					dash(s.RemoteAddr), dash(s.RequestID), headerLine(s.Headers))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, newest first (default: all kept)")
	return cmd
}

// headerLine writes headers as "Name: value; …", by name.
func headerLine(h map[string]string) string {
	var b strings.Builder
	for i, name := range slices.Sorted(maps.Keys(h)) {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(name + ": " + h[name])
	}
	return oneLine(b.String(), 400)
}
