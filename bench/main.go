// Command hookbench is what `make bench` runs: it measures hookinbox on this
// machine, in one run, against ceilings measured in the same run, and
// prints the table README.md quotes. It is a module of its own
// (github.com/hookinbox/hookinbox/bench), so that neither it nor its SQL
// helpers are part of the product.
//
// It creates a fresh database on the server DATABASE_URL names (dropped at
// the end), migrates it, and measures: (a) the per-event durable ceiling,
// the claim and enqueue of one delivery issued in-process through pgx, one
// event per transaction; (b) the receiver with a transaction per delivery
// and (c) with group commit, through real HTTP from this process; (d) a
// duplicate storm and a 50 % duplicate mix; (e) worker drain of preloaded
// events against River's own no-op burn-down; (f) ack latency and event age
// under a steady open-loop load at half of (c); (g) the processes' peak RSS;
// a replay storm; the isolated storm (one source storms while another, on
// a queue of its own, sends 10 a second); and (c) again with two million
// processed rows in the
// inbox. The receiver and the workers run as the real binaries, as
// subprocesses.
//
//	hookbench --bin bin [--quick]
//	hookbench attack --addr 127.0.0.1:8080 --pid PID --attack slow-body --conns 1100
//	hookbench capacity --receivers 2 --workers 3
//
// The same table is written as JSON to bench/results/latest.json and a
// timestamped copy. The attack verb runs one of internal/testkit/hostile's
// attacks against a running receiver (see attack.go and scripts/attack.sh).
// The capacity verb measures what the server DATABASE_URL names sustains
// durably, and the connections N receivers and M workers take (capacity.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are hookbench's flags. Every loop they size is bounded in count
// and in time.
type options struct {
	Bin, Results  string
	Quick, KeepDB bool
	// Statements splits the server's side of each drain and of (a)-(c) by
	// statement, with pg_stat_statements.
	Statements             bool
	Phases                 map[string]bool
	Warmup, Window         time.Duration
	Rounds                 int
	Clients                int
	CeilingConc            []int
	PerRequestConns        int
	MaxRequests            int64
	DrainEvents, RiverJobs int
	// TakeEvents is how many events the take A/B takes from each layout.
	TakeEvents     int
	DrainDeadline  time.Duration
	SteadyWindow   time.Duration
	SteadyFraction float64
	SteadyInflight int
	ScaleRows      int
	// The replay storm's sizes (storm.go).
	StormDeliveries int
	StormFraction   float64
	StormDeadline   time.Duration
	StormBaseline   time.Duration
}

// allPhases lists the phases in the order they run.
var allPhases = []string{"a", "b", "c", "d", "e", "take", "f", "storm", "fair", "scale"}

func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("hookbench", flag.ContinueOnError)
	fs.StringVar(&o.Bin, "bin", "bin", "folder holding the receiver, worker and ledger binaries")
	fs.StringVar(&o.Results, "results", "bench/results", "folder the JSON results are written to")
	fs.BoolVar(&o.Quick, "quick", false, "a smoke run of about a minute: short windows, small counts")
	fs.BoolVar(&o.KeepDB, "keep-db", false, "keep the benchmark database instead of dropping it")
	fs.BoolVar(&o.Statements, "statements", false, "split PostgreSQL's time in (a)-(c) and each drain by statement (the server must preload pg_stat_statements)")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run, from "+strings.Join(allPhases, ","))
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured warm-up before each measured window")
	fs.DurationVar(&o.Window, "window", 6*time.Second, "measured window of each closed-loop load")
	fs.IntVar(&o.Rounds, "rounds", 3, "(a), (b), (c): rounds the window is split into, interleaving the measurements")
	fs.IntVar(&o.Clients, "clients", 64, "concurrent clients of the many-client loads")
	ceiling := fs.String("ceiling-conc", "8,16,32", "concurrencies of the ceiling (a)")
	fs.IntVar(&o.PerRequestConns, "per-request-conns", 32, "(b): database.max_conns and batch_flushers of the per-request receiver")
	fs.Int64Var(&o.MaxRequests, "max-requests", 2_000_000, "upper bound on the requests of any one load")
	fs.IntVar(&o.DrainEvents, "drain-events", 200_000, "(e): pending events preloaded for each drain")
	fs.IntVar(&o.TakeEvents, "take-events", 60_000, "take A/B: events taken from each layout")
	fs.IntVar(&o.RiverJobs, "river-jobs", 200_000, "(e): no-op jobs of River's burn-down")
	fs.DurationVar(&o.DrainDeadline, "drain-deadline", 45*time.Second, "(e), (f): stop waiting for a drain after this long and report the rate so far")
	fs.DurationVar(&o.SteadyWindow, "steady-window", 15*time.Second, "(f): measured window of the steady load")
	fs.Float64Var(&o.SteadyFraction, "steady-fraction", 0.5, "(f): the steady rate as a fraction of the pipeline's maximum, 1/(1/(c) + 1/(e) noop drain), or of (c) without (e)")
	fs.IntVar(&o.SteadyInflight, "steady-inflight", 2048, "(f): most requests in flight at once; above the receiver's max_in_flight and batch_queue (1024 each), so that an overload meets its back-pressure (503) rather than waiting in hookbench")
	fs.IntVar(&o.ScaleRows, "scale-rows", 2_000_000, "scale: processed rows preloaded before (c) is measured again")
	stormFlags(fs, o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Phases = map[string]bool{}
	for p := range strings.SplitSeq(*phases, ",") {
		if p = strings.TrimSpace(p); !slices.Contains(allPhases, p) {
			return nil, fmt.Errorf("--phases: unknown phase %q (from %s)", p, strings.Join(allPhases, ","))
		}
		o.Phases[p] = true
	}
	for c := range strings.SplitSeq(*ceiling, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--ceiling-conc: %q is not a positive number", c)
		}
		o.CeilingConc = append(o.CeilingConc, n)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.Quick {
		o.quick(set)
	}
	if o.Clients <= 0 || o.Window <= 0 || o.SteadyFraction <= 0 || o.SteadyInflight <= 0 || o.DrainEvents <= 0 || o.RiverJobs <= 0 || o.TakeEvents <= 0 {
		return nil, errors.New("--clients, --window, --steady-fraction, --steady-inflight, --drain-events and --river-jobs must be positive")
	}
	if o.StormDeliveries < 2 || o.StormFraction <= 0 || o.StormDeadline <= 0 || o.StormBaseline <= 0 {
		return nil, errors.New("--storm-deliveries must be at least 2, --storm-fraction, --storm-deadline and --storm-baseline positive")
	}
	return o, nil
}

// quick shrinks every size the user did not set to a smoke run's.
func (o *options) quick(set map[string]bool) {
	shrink := func(name string, apply func()) {
		if !set[name] {
			apply()
		}
	}
	shrink("warmup", func() { o.Warmup = 300 * time.Millisecond })
	shrink("window", func() { o.Window = 2 * time.Second })
	shrink("rounds", func() { o.Rounds = 2 })
	shrink("ceiling-conc", func() { o.CeilingConc = []int{8, 32} })
	shrink("drain-events", func() { o.DrainEvents = 3_000 })
	shrink("river-jobs", func() { o.RiverJobs = 20_000 })
	shrink("take-events", func() { o.TakeEvents = 3_000 })
	shrink("drain-deadline", func() { o.DrainDeadline = 20 * time.Second })
	shrink("steady-window", func() { o.SteadyWindow = 3 * time.Second })
	shrink("scale-rows", func() { o.ScaleRows = 100_000 })
	shrink("storm-deliveries", func() { o.StormDeliveries = 4_000 })
	shrink("storm-deadline", func() { o.StormDeadline = 30 * time.Second })
	shrink("storm-baseline", func() { o.StormBaseline = 3 * time.Second })
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "attack":
		err = runAttack(ctx, os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "capacity":
		_, err = runCapacity(ctx, os.Args[2:], os.Stdout)
	default:
		err = run(ctx, os.Args[1:])
	}
	stop() // before os.Exit, which skips deferred calls
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "hookbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	opts, err := parseOptions(args)
	if err != nil {
		return err
	}
	adminURL := os.Getenv("DATABASE_URL")
	if adminURL == "" {
		return errors.New("DATABASE_URL is not set (run it with `make bench`, which starts a private PostgreSQL)")
	}
	b, err := newBench(ctx, opts, adminURL)
	if err != nil {
		return err
	}
	defer b.close()
	b.runPhases(ctx)
	return b.finish()
}
