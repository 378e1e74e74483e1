package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/doctest"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// TestDocumentedCommands is issue 42's item 6: every inboxctl command line
// the pages show (README.md, docs/*.md, the chart's README), in a block or
// named in prose, must name a verb inboxctl has and only flags that verb
// takes; and every line of a block that shows values rather than
// placeholders must have as many arguments as its verb takes, and is run, in the pages' order,
// against a database of its own with a config that has a stripe source
// and a real receiver (what README's send sends is stored, and shown
// after), where it may fail for the data (exit 1: no such event) but not
// for its command line (exit 2). It finds the commands by itself, so a verb or a
// flag a page gains is checked as soon as it is written.
func TestDocumentedCommands(t *testing.T) {
	t.Parallel()
	root := doctest.Root(t)
	db := dbtest.New(t)
	// The real receiver, on the address the config gives inboxctl send,
	// so that the events the pages send are stored and looked up after.
	configPath := writeDocsConfig(t, db.URL, "127.0.0.1:1")
	receiver := serveReceiver(t, configPath, db)
	configPath = writeDocsConfig(t, db.URL, strings.TrimPrefix(receiver.URL, "http://"))
	checked, ran, ok := 0, 0, 0
	for _, page := range doctest.Pages(t, root) {
		for _, c := range page.Commands("inboxctl") {
			checked++
			args, err := checkCommandLine(c.Words[1:], c.InBlock && !c.Synopsis)
			if err != nil {
				t.Errorf("%s: %s: %v", c.Where, c.Text, err)
				continue
			}
			if !c.InBlock || c.Synopsis {
				continue
			}
			ran++
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			var out, errOut strings.Builder
			code := run(ctx, append([]string{"--config", configPath}, args...), strings.NewReader(""), &out, &errOut)
			cancel()
			t.Logf("%s: exit %d: %s %s", c.Where, code, c.Text, strings.TrimSpace(errOut.String()))
			if code == exitOK {
				ok++
			}
			if code == exitUsage {
				t.Errorf("%s: %s: inboxctl refused the command line (exit %d): %s", c.Where, c.Text, code, errOut.String())
			}
		}
	}
	t.Logf("%d inboxctl command lines checked, %d of them run, %d with exit 0", checked, ran, ok)
	require.Positive(t, ran, "no inboxctl command line was run: the pages were not read")
	require.Greater(t, ok, ran/2, "most command lines failed: is the docs check's config refused?")
}

// writeDocsConfig writes the config the documented commands run with: a
// receiver on listen and a stripe source, reconciled from a Stripe events
// API on loopback that lists nothing (so that no command reaches a
// provider).
func writeDocsConfig(t *testing.T, databaseURL, listen string) string {
	t.Helper()
	stripeAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/events" {
			http.Error(w, `{"error":{"message":"Unrecognized request URL"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","url":"/v1/events","has_more":false,"data":[]}`)
	}))
	t.Cleanup(stripeAPI.Close)
	yaml := fmt.Sprintf(`database: {url: %q}
log: {level: error}
receiver: {listen: %q}
sources:
  - name: stripe
    provider: stripe
    secrets: [whsec_docs_check]
    reconcile: {enabled: true, api_key: rk_docs_check, api_base_url: %q}
worker:
  routes: [{source: stripe, handlers: [log]}]
`, databaseURL, listen, stripeAPI.URL)
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

// checkCommandLine walks an inboxctl command line (its words after
// "inboxctl") through inboxctl's own command tree: every word before the
// first argument that names a subcommand descends to it (and a command
// that takes no argument, such as sources, needs one), and every flag
// must be one the command found takes (a flag that takes a value takes the
// next word, unless written --flag=value). With args, the arguments left
// must be as many as the command takes. It returns the command line with
// --config taken out.
func checkCommandLine(words []string, args bool) ([]string, error) {
	_, rest, err := daemon.SplitConfig(words)
	if err != nil {
		return nil, err
	}
	root := newRoot("")
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	cmd := root
	var positional []string
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		if w == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if strings.HasPrefix(w, "-") && len(w) > 1 {
			f, inline := lookupFlag(cmd, w)
			if f == nil {
				return nil, fmt.Errorf("%q takes no flag %s", cmd.CommandPath(), w)
			}
			if !inline && f.NoOptDefVal == "" {
				i++ // its value
			}
			continue
		}
		if sub := subcommand(cmd, w); sub != nil && len(positional) == 0 {
			cmd = sub
			continue
		}
		positional = append(positional, w)
	}
	if cmd.HasSubCommands() && len(positional) > 0 && !takesArgs(cmd) {
		return nil, fmt.Errorf("%q has no command %q", cmd.CommandPath(), positional[0])
	}
	if args && !cmd.DisableFlagParsing {
		if err := cmd.ValidateArgs(positional); err != nil {
			var u *usageError
			if errors.As(err, &u) {
				err = u.err
			}
			return nil, fmt.Errorf("%s: %w", cmd.CommandPath(), err)
		}
	}
	return rest, nil
}

// takesArgs reports whether cmd takes arguments (one to three) beside its
// subcommands, as replay takes SOURCE EVENT_ID.
func takesArgs(cmd *cobra.Command) bool {
	for _, a := range [][]string{{"A"}, {"A", "B"}, {"A", "B", "C"}} {
		if cmd.ValidateArgs(a) == nil {
			return true
		}
	}
	return false
}

// lookupFlag finds the flag word names (--name, --name=value, -n) among
// those cmd takes, its parents' persistent ones and the help and version
// flags; inline says the value is in the word.
func lookupFlag(cmd *cobra.Command, word string) (f *pflag.Flag, inline bool) {
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	name, _, inline := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, set := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
		switch {
		case strings.HasPrefix(word, "--"):
			f = set.Lookup(name)
		case len(name) == 1:
			f = set.ShorthandLookup(name)
		default:
			f = set.Lookup(name) // send parses Go's flags: -data works too
		}
		if f != nil {
			return f, inline
		}
	}
	return nil, false
}

// subcommand is cmd's subcommand named (or aliased) name, or nil.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}
