// Command hookbench is what `make bench` runs: it measures hookinbox on this
// machine, in one run, against ceilings measured in the same run, and
// prints one table.
//
// It creates a fresh database on the server DATABASE_URL names (dropped at
// the end), migrates it, and measures: (a) the per-event durable ceiling,
// the claim and enqueue of one delivery issued in-process through pgx, one
// event per transaction; (b) the receiver with a transaction per delivery
// and (c) with group commit, through real HTTP from this process; (d) a
// duplicate storm and a 50 % duplicate mix; (e) worker drain of preloaded
// events against River's own no-op burn-down; (f) ack latency and event age
// under a steady open-loop load at half of (c); (g) the processes' peak RSS;
// and (c) again with two million processed rows in the inbox; (q) the cost
// of database.query_mode, and of PgBouncer in transaction pooling mode, on
// the receiver's ingest and a worker's drain. The receiver and the workers
// run as the real binaries, as subprocesses.
//
//	hookbench --bin bin [--quick] [--cpuprofile DIR]
//
// The same table is written as JSON to bench/results/latest.json and a
// timestamped copy. `hookbench receiver|worker [--cpuprofile F] --config C`
// runs the receiver or the worker exactly as cmd/receiver and cmd/worker
// do, with a CPU profile; --cpuprofile uses them for (c) and a noop drain.
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
	Bin, Results, CPUProfile string
	Quick, KeepDB            bool
	Phases                   map[string]bool
	// Drains, when not nil, replaces the drains of (e) (see parseDrain);
	// River's burn-downs run only with River.
	Drains                 []drainRun
	River                  bool
	Warmup, Window         time.Duration
	Rounds                 int
	Clients                int
	CeilingConc            []int
	PerRequestConns        int
	MaxRequests            int64
	DrainEvents, RiverJobs int
	DrainDeadline          time.Duration
	SteadyWindow           time.Duration
	SteadyFraction         float64
	SteadyInflight         int
	ScaleRows              int
	WorkerConcurrency      int
	// The replay storm's sizes (storm.go).
	StormDeliveries int
	StormFraction   float64
	StormDeadline   time.Duration
}

// allPhases lists the phases in the order they run.
var allPhases = []string{"a", "b", "c", "d", "e", "f", "storm", "scale", "q"}

func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("hookbench", flag.ContinueOnError)
	fs.StringVar(&o.Bin, "bin", "bin", "folder holding the receiver, worker and ledger binaries")
	fs.StringVar(&o.Results, "results", "bench/results", "folder the JSON results are written to")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "folder to write CPU profiles of the receiver during (c) and of a noop worker during (e) to")
	fs.BoolVar(&o.Quick, "quick", false, "a smoke run of about a minute: short windows, small counts")
	fs.BoolVar(&o.KeepDB, "keep-db", false, "keep the benchmark database instead of dropping it")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run, from "+strings.Join(allPhases, ","))
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured warm-up before each measured window")
	fs.DurationVar(&o.Window, "window", 6*time.Second, "measured window of each closed-loop load")
	fs.IntVar(&o.Rounds, "rounds", 3, "(a), (b), (c): rounds the window is split into, interleaving the measurements")
	fs.IntVar(&o.Clients, "clients", 64, "concurrent clients of the many-client loads")
	ceiling := fs.String("ceiling-conc", "8,16,32", "concurrencies of the ceiling (a)")
	fs.IntVar(&o.PerRequestConns, "per-request-conns", 32, "(b): database.max_conns and batch_flushers of the per-request receiver")
	fs.Int64Var(&o.MaxRequests, "max-requests", 2_000_000, "upper bound on the requests of any one load")
	fs.IntVar(&o.DrainEvents, "drain-events", 200_000, "(e): pending events preloaded for each drain")
	fs.IntVar(&o.RiverJobs, "river-jobs", 200_000, "(e): no-op jobs of River's burn-down")
	fs.DurationVar(&o.DrainDeadline, "drain-deadline", 45*time.Second, "(e), (f): stop waiting for a drain after this long and report the rate so far")
	fs.DurationVar(&o.SteadyWindow, "steady-window", 15*time.Second, "(f): measured window of the steady load")
	fs.Float64Var(&o.SteadyFraction, "steady-fraction", 0.5, "(f): the steady rate as a fraction of the pipeline's maximum, 1/(1/(c) + 1/(e) noop drain), or of (c) without (e)")
	fs.IntVar(&o.SteadyInflight, "steady-inflight", 2048, "(f): most requests in flight at once; above the receiver's max_in_flight and batch_queue (1024 each), so that an overload meets its back-pressure (503) rather than waiting in hookbench")
	fs.IntVar(&o.ScaleRows, "scale-rows", 2_000_000, "scale: processed rows preloaded before (c) is measured again")
	drains := fs.String("drains", "", "(e): run these drains instead, comma-separated: noop<workers> or ledger<workers>, then -c<concurrency>, -m<max_conns>, -g<group_max_events>, -a<ledger accounts> (e.g. noop1,ledger2-a5); \"river\" adds River's burn-downs")
	fs.IntVar(&o.WorkerConcurrency, "worker-concurrency", 0, "(e), (f): worker.concurrency (0: the product's default)")
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
	if *drains != "" {
		o.Drains = []drainRun{}
		for name := range strings.SplitSeq(*drains, ",") {
			if name = strings.TrimSpace(name); name == "river" {
				o.River = true
				continue
			}
			d, err := parseDrain(name)
			if err != nil {
				return nil, fmt.Errorf("--drains: %w", err)
			}
			o.Drains = append(o.Drains, d)
		}
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
	if o.Clients <= 0 || o.Window <= 0 || o.SteadyFraction <= 0 || o.SteadyInflight <= 0 || o.DrainEvents <= 0 || o.RiverJobs <= 0 {
		return nil, errors.New("--clients, --window, --steady-fraction, --steady-inflight, --drain-events and --river-jobs must be positive")
	}
	if o.StormDeliveries < 2 || o.StormFraction <= 0 || o.StormDeadline <= 0 {
		return nil, errors.New("--storm-deliveries must be at least 2, --storm-fraction and --storm-deadline positive")
	}
	if o.CPUProfile != "" {
		if err := os.MkdirAll(o.CPUProfile, 0o755); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
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
	shrink("drain-deadline", func() { o.DrainDeadline = 20 * time.Second })
	shrink("steady-window", func() { o.SteadyWindow = 3 * time.Second })
	shrink("scale-rows", func() { o.ScaleRows = 100_000 })
	shrink("storm-deliveries", func() { o.StormDeliveries = 4_000 })
	shrink("storm-deadline", func() { o.StormDeadline = 30 * time.Second })
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	var err error
	if len(os.Args) > 1 && (os.Args[1] == "receiver" || os.Args[1] == "worker") {
		err = runProfiled(ctx, os.Args[1], os.Args[2:])
	} else {
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
