// Command inboxctl is hookinbox's operator CLI. --config may come before or
// after the command. Every command has --help; `inboxctl completion bash`
// (zsh, fish, powershell) prints a shell completion script. Exit status: 0
// on success, 1 on an operational failure (the database, a missing event),
// 2 on a usage error.
//
//	inboxctl [--config F] migrate          apply hookinbox's and River's migrations
//	inboxctl [--config F] stats [SOURCE]    count inbox rows by status
//	inboxctl [--config F] events show SOURCE EVENT_ID [--json]
//	inboxctl [--config F] events list [--source S] [--status S] [--type T] [--since D] [--until D] [--error TEXT] [--limit N] [--json]
//	                                        look up inbox rows, with their River job's id and state
//	inboxctl [--config F] events purge [EVENT_ID...] --source S [filters] [--yes]
//	                                        erase chosen events' data, keeping their keys
//	inboxctl [--config F] events verify ID... | --source S EVENT_ID... [--at received|now|TIME] [--json]
//	                                        verify stored deliveries again; name the secret that signed each
//	inboxctl [--config F] replay [SOURCE EVENT_ID] [filters] [--dry-run] [--yes] [--rate N] [--batch N]
//	inboxctl [--config F] replay status|cancel|resume [ID]
//	                                        process events again, one or in bulk
//	inboxctl [--config F] prune [--dry-run] apply each source's retention now
//	inboxctl [--config F] sources list [--json]
//	inboxctl [--config F] sources pause SOURCE [--reason R]
//	inboxctl [--config F] sources resume SOURCE
//	                                        hold a source's events while its deliveries are still stored; drain them
//	inboxctl [--config F] rejections SOURCE [--limit N] [--json]
//	                                        the source's last refused deliveries, headers redacted
//	inboxctl [--config F] outbox list [--status S] [--destination D] [--limit N] [--json]
//	inboxctl [--config F] outbox replay [KEY...] [--destination D] [--all]
//	inboxctl [--config F] outbox enable DESTINATION
//	                                        failed outbox messages and disabled destinations
//	inboxctl [--config F] send --source S [--id ID] [--type T] --data BODY [--url U]
//	                                        sign a delivery as S's provider and POST it
//	inboxctl [--config F] reconcile SOURCE [--since D] [--until D] [--dry-run]
//	                                        list what the provider sent that the inbox lacks; claim it now
//	inboxctl [--config F] doctor            say what an acknowledged delivery survives on the database
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hookinbox/hookinbox/internal/buildinfo"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// The exit statuses.
const (
	exitOK          = 0
	exitOperational = 1
	exitUsage       = 2
)

// usageError is a command line inboxctl cannot run: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs inboxctl's command line and returns its exit status; a command
// that asks for confirmation reads the answer from stdin.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	path, rest, err := daemon.SplitConfig(args)
	if err != nil {
		fmt.Fprintf(stderr, "inboxctl: %v\n", err)
		return exitUsage
	}
	root := newRoot(path)
	root.SetArgs(rest)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err = root.ExecuteContext(ctx)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case isUsage(err):
		fmt.Fprintf(stderr, "inboxctl: %s\nRun 'inboxctl --help' for usage.\n", message(err))
		return exitUsage
	default:
		fmt.Fprintf(stderr, "inboxctl: %s\n", message(err))
		return exitOperational
	}
}

// message is err's text for an operator. internal/admin's errors carry the
// package prefix "admin: " for logs; inboxctl says its own name instead.
func message(err error) string {
	s := strings.TrimPrefix(err.Error(), "admin: ")
	return strings.ReplaceAll(s, ": admin: ", ": ")
}

func isUsage(err error) bool {
	var u *usageError
	// cobra's own refusals of a command line carry no type.
	return errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command") ||
		strings.HasPrefix(err.Error(), "unknown flag") || strings.HasPrefix(err.Error(), "unknown shorthand flag")
}

// args wraps a cobra argument check so that its refusal is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return &usageError{err}
		}
		return nil
	}
}

// verbs says what each command demands of the config: send signs for a
// source, events verify verifies with the sources' secrets; a command that
// deletes or rewrites inbox rows (prune, events purge, replay, sources
// pause and resume, reconcile) checks the sources as the worker does, so
// that it refuses what the daemons refuse (a retention inside the
// provider's redelivery window), and reconcile needs the sources'
// reconcile sections (their API keys); the others need only the database.
var verbs = daemon.Verbs{
	"send": config.NeedReceiver, "verify": config.NeedSources,
	"prune": config.NeedInbox, "purge": config.NeedInbox, "replay": config.NeedInbox, "sources": config.NeedInbox,
	"reconcile": config.NeedInbox | config.NeedReconcile,
}

// boot loads the config (from path, else $HOOKINBOX_CONFIG) as verb
// demands, through daemon.Boot like every hookinbox binary.
func boot(ctx context.Context, path, verb string) (*daemon.Env, error) {
	bootArgs := []string{verb}
	if path != "" {
		bootArgs = []string{"--config", path, verb}
	}
	env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "inboxctl", Args: bootArgs, Verbs: verbs})
	return env, err
}

// needCommand is the RunE of a command that only groups others: run
// without one, it prints its help and fails with a usage error.
func needCommand(cmd *cobra.Command, _ []string) error {
	_ = cmd.Help()
	return &usageError{errors.New("no command given")}
}

func newRoot(path string) *cobra.Command {
	root := &cobra.Command{
		Use:   "inboxctl",
		Short: "hookinbox's operator CLI",
		Long: `inboxctl is hookinbox's operator CLI. It migrates the database (migrate), counts
and looks up inbox events (stats, events list, events show), processes events again
(replay), applies retention now (prune), erases chosen events' data (events purge),
verifies stored deliveries again (events verify),
pauses and resumes a source (sources), shows a source's refused deliveries
(rejections), lists and replays failed outbox messages (outbox), sends signed
test deliveries (send), lists and claims now what a source's provider sent that
the inbox lacks (reconcile), and says what an acknowledged delivery survives on the
database (doctor).
--config F may come before or after the command (default: $` + config.PathEnv + `).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          args(cobra.NoArgs),
		RunE:          needCommand,
		Version:       buildinfo.Version(),
	}
	root.SetVersionTemplate("inboxctl {{.Version}}\n")
	// Taken out of the command line by daemon.SplitConfig before cobra
	// parses it; declared so that --help shows it.
	root.PersistentFlags().String("config", "", "config file (default: $"+config.PathEnv+")")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })

	root.AddCommand(&cobra.Command{
		Use:   "migrate",
		Short: "Apply hookinbox's and River's migrations (idempotent)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := boot(cmd.Context(), path, "migrate")
			if err != nil {
				return err
			}
			defer env.Close()
			return daemon.Migrate(cmd.Context(), env, nil)
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "stats [SOURCE]",
		Short: "Count inbox rows by status",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			env, err := boot(cmd.Context(), path, "stats")
			if err != nil {
				return err
			}
			defer env.Close()
			// A clear message, not SQL's, when the database is unreachable
			// or not migrated yet.
			if err := env.CheckSchema(cmd.Context()); err != nil {
				return err
			}
			source := ""
			if len(a) > 0 {
				source = a[0]
			}
			c, err := inboxstore.New(env.Pool).Count(cmd.Context(), &inboxstore.Filter{Source: source})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pending %d\ndone %d\nfailed %d\n", c.Pending, c.Done, c.Failed)
			return nil
		},
	})
	sendCmd := &cobra.Command{
		Use:   "send --source S [--id ID] [--type T] --data BODY [--url U]",
		Short: "Sign a delivery as a source's provider would and POST it to the receiver",
		Long: `send signs BODY (JSON; for twilio also form parameters) as source S's provider would,
with S's first secret and credentials, and POSTs it to the receiver; --id and --type are
required where the provider sends them in headers (send names the missing ones).`,
		// send parses its own flags (see send.go); they are added to this
		// command's flag set only so that --help lists them.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, a []string) error {
			for _, arg := range a {
				if arg == "--help" || arg == "-help" || arg == "-h" {
					return cmd.Help()
				}
			}
			env, err := boot(cmd.Context(), path, "send")
			if err != nil {
				return err
			}
			defer env.Close()
			return send(cmd.Context(), env.Config, a, cmd.OutOrStdout())
		},
	}
	sendFlags, _ := newSendFlags()
	sendCmd.Flags().AddGoFlagSet(sendFlags)
	root.AddCommand(sendCmd)
	root.AddCommand(newEventsCommand(path), newReplayCommand(path), newPruneCommand(path))
	root.AddCommand(newSourcesCommand(path))
	root.AddCommand(newRejectionsCommand(path))
	root.AddCommand(newOutboxCommand(path))
	root.AddCommand(newDoctorCommand(path))
	root.AddCommand(newReconcileCommand(path))
	return root
}
