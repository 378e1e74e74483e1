package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/schema"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// The capacity verb (issue 27): what the server DATABASE_URL names will
// sustain durably, in its own terms, measured in well under a minute on a
// scratch database of its own (created, migrated and dropped). It measures
// three things and derives the rest (capacitymodel.go):
//
//   - durable commits: connections each running a tiny INSERT and COMMIT
//     with synchronous_commit on; at 1 connection each commit waits for a
//     flush of its own, so its rate is the server's flushes per second;
//     more connections share flushes (group commit);
//   - the receiver's claim: inboxstore.Ingester.IngestGroup of groups of
//     one-event deliveries, as the receiver's group commit issues them, on
//     batch_flushers connections;
//   - the worker's drain: the real pkg/worker, in-process, with the
//     product's defaults and the noop handler, working the events the
//     claim left pending.
//
// The server's CPU is read from /proc for the scratch database's own
// backends when the server runs on this machine, so that other databases'
// work on a shared server is not counted; on a remote server the figures
// are wall-time based only.

// capacityOptions are the capacity verb's flags.
type capacityOptions struct {
	// Window is each measurement's length.
	Window time.Duration
	// Conns are the connection counts of the durable-commit measurement;
	// 1 and batch_flushers are always among them.
	Conns []int
	// Group is the deliveries (one event each) of a claim transaction.
	Group int
	// Flushers is the receiver's batch_flushers: the claim's connections.
	Flushers int
	// Receivers and Workers are the processes the connection budget is for;
	// ReceiverConns and WorkerConns each one's database.max_conns.
	Receivers, Workers         int
	ReceiverConns, WorkerConns int
	// WorkerConcurrency and WorkerGroup are the drain's worker.concurrency
	// and worker.group_max_events.
	WorkerConcurrency, WorkerGroup int
	KeepDB                         bool
}

func parseCapacityOptions(args []string) (*capacityOptions, error) {
	o := &capacityOptions{}
	fs := flag.NewFlagSet("hookbench capacity", flag.ContinueOnError)
	fs.DurationVar(&o.Window, "window", 3*time.Second, "length of each measurement")
	conns := fs.String("conns", "1,4,16", "connection counts of the durable-commit measurement (1 and --flushers are added)")
	fs.IntVar(&o.Group, "group", defaults.Receiver.MaxEvents, "events per claim transaction (the receiver's batch_max_events caps it)")
	fs.IntVar(&o.Flushers, "flushers", defaults.Receiver.Flushers, "the receiver's batch_flushers: claim transactions in flight at once")
	fs.IntVar(&o.Receivers, "receivers", 1, "receiver processes (replicas) of the connection budget")
	fs.IntVar(&o.Workers, "workers", 1, "worker processes (replicas) of the connection budget")
	fs.IntVar(&o.ReceiverConns, "receiver-conns", int(defaults.Database.MaxConns), "each receiver's database.max_conns")
	fs.IntVar(&o.WorkerConns, "worker-conns", int(defaults.Database.MaxConns), "each worker's database.max_conns (River's connections are part of it)")
	fs.IntVar(&o.WorkerConcurrency, "worker-concurrency", defaults.Worker.Concurrency, "the drain's worker.concurrency")
	fs.IntVar(&o.WorkerGroup, "worker-group", defaults.Worker.GroupMaxEvents, "the drain's worker.group_max_events")
	fs.BoolVar(&o.KeepDB, "keep-db", false, "keep the scratch database instead of dropping it")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Window <= 0 || o.Group <= 0 || o.Flushers <= 0 || o.Receivers < 0 || o.Workers < 0 || o.ReceiverConns <= 0 || o.WorkerConns <= 0 ||
		o.WorkerConcurrency <= 0 || o.WorkerGroup <= 0 {
		return nil, errors.New("--window, --group, --flushers, --receiver-conns, --worker-conns, --worker-concurrency and --worker-group must be positive, " +
			"--receivers and --workers not negative")
	}
	o.Conns = []int{1, o.Flushers}
	for c := range strings.SplitSeq(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--conns: %q is not a positive number", c)
		}
		o.Conns = append(o.Conns, n)
	}
	slices.Sort(o.Conns)
	o.Conns = slices.Compact(o.Conns)
	return o, nil
}

// runCapacity is the capacity verb: it measures, prints the model to w and
// returns it.
//
//	hookbench capacity [--window 3s] [--receivers N] [--workers M]
func runCapacity(ctx context.Context, args []string, w io.Writer) (*Capacity, error) {
	o, err := parseCapacityOptions(args)
	if err != nil {
		return nil, err
	}
	adminURL := os.Getenv("DATABASE_URL")
	if adminURL == "" {
		return nil, errors.New("DATABASE_URL is not set: point it at the PostgreSQL server to measure")
	}
	name := "hookbench_capacity_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dbURL, err := createDatabase(ctx, adminURL, name)
	if err != nil {
		return nil, err
	}
	if !o.KeepDB {
		defer func() {
			if err := dropDatabase(adminURL, name); err != nil {
				progress("could not drop database %s: %v", name, err)
			}
		}()
	}
	progress("scratch database %s created", name)
	c, err := measureCapacity(ctx, o, dbURL)
	if err != nil {
		return nil, err
	}
	c.print(w)
	return c, nil
}

// measureCapacity migrates the scratch database and runs the three
// measurements on it.
func measureCapacity(ctx context.Context, o *capacityOptions, dbURL string) (*Capacity, error) {
	pool, err := newPool(ctx, dbURL, max(o.Flushers, slices.Max(o.Conns), 2))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err := schema.Migrate(ctx, pool, nil, schema.Core()); err != nil {
		return nil, err
	}
	c := &Capacity{Options: o, Cores: runtime.NumCPU()}
	if err := c.readServer(ctx, pool); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE capacity_commit (id bigint GENERATED ALWAYS AS IDENTITY, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, err
	}
	for _, n := range o.Conns {
		r, err := measureCommits(ctx, pool, n, o.Window)
		if err != nil {
			return nil, err
		}
		progress("capacity: %d conns, %.0f durable commits/s, p50 %.2f ms", n, r.PerSec, r.P50Millis)
		c.Commits = append(c.Commits, r)
	}
	if c.Claim, err = measureClaim(ctx, pool, o); err != nil {
		return nil, err
	}
	progress("capacity: claim %.0f events/s, %.0f server µs/event", c.Claim.EventsPerSec, c.Claim.ServerMicros)
	if c.Drain, err = measureDrain(ctx, dbURL, o); err != nil {
		return nil, err
	}
	progress("capacity: drain %.0f events/s, %.0f server µs/event", c.Drain.EventsPerSec, c.Drain.ServerMicros)
	c.derive()
	return c, nil
}

// CommitRate is the durable-commit measurement at one connection count.
type CommitRate struct {
	Conns  int     `json:"conns"`
	PerSec float64 `json:"commits_per_sec"`
	// P50Millis and P99Millis are one commit's latency.
	P50Millis float64 `json:"p50_ms"`
	P99Millis float64 `json:"p99_ms"`
}

// measureCommits runs n connections, each inserting a row and committing
// with synchronous_commit on, for window.
func measureCommits(ctx context.Context, pool *pgxpool.Pool, n int, window time.Duration) (CommitRate, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		hist Histogram
		errs []error
	)
	start := time.Now()
	end := start.Add(window)
	for range n {
		wg.Go(func() {
			var h Histogram
			err := pool.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
				if _, err := conn.Exec(ctx, `SET synchronous_commit = on`); err != nil {
					return err
				}
				defer conn.Exec(context.WithoutCancel(ctx), `RESET synchronous_commit`) //nolint:errcheck // a pool connection's setting, reset on the way out
				for ctx.Err() == nil && time.Now().Before(end) {
					t0 := time.Now()
					if _, err := conn.Exec(ctx, `INSERT INTO capacity_commit DEFAULT VALUES`); err != nil {
						return err
					}
					h.Record(time.Since(t0))
				}
				return nil
			})
			mu.Lock()
			hist.Merge(&h)
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return CommitRate{}, fmt.Errorf("durable commits at %d conns: %w", n, err)
	}
	if hist.n == 0 {
		return CommitRate{}, fmt.Errorf("durable commits at %d conns: none committed within %s", n, window)
	}
	r := CommitRate{Conns: n, PerSec: float64(hist.n) / elapsed.Seconds(),
		P50Millis: ms(hist.Quantile(0.5)), P99Millis: ms(hist.Quantile(0.99))}
	return r, nil
}

// StepCost is the claim's or the drain's measurement.
type StepCost struct {
	Events       int64   `json:"events"`
	EventsPerSec float64 `json:"events_per_sec"`
	// ServerMicros is the scratch database's backends' CPU per event, 0
	// when the server is not on this machine.
	ServerMicros float64 `json:"server_cpu_us_per_event,omitempty"`
	// P50Millis is a claim transaction's latency (claim only).
	P50Millis float64 `json:"p50_ms,omitempty"`
}

// measureClaim runs o.Flushers connections, each claiming groups of
// o.Group one-event deliveries, one transaction (durable) per group.
func measureClaim(ctx context.Context, pool *pgxpool.Pool, o *capacityOptions) (StepCost, error) {
	ingester, err := newIngester(pool)
	if err != nil {
		return StepCost{}, err
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		hist   Histogram
		events int64
		errs   []error
		seq    int64
	)
	next := func() int64 { mu.Lock(); defer mu.Unlock(); seq++; return seq }
	cpu0, err := backendCPU(ctx, pool, "")
	if err != nil {
		return StepCost{}, err
	}
	start := time.Now()
	end := start.Add(o.Window)
	for range o.Flushers {
		wg.Go(func() {
			var (
				h   Histogram
				n   int64
				err error
			)
			for err == nil && ctx.Err() == nil && time.Now().Before(end) {
				group := make([]*inboxstore.Delivery, o.Group)
				for i := range group {
					s := next()
					if group[i], err = newDelivery(fmt.Sprintf("msg_capacity_%09d", s), s, 0, time.Now()); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
				t0 := time.Now()
				var res []*inboxstore.IngestResult
				res, err = ingester.IngestGroup(ctx, group)
				h.Record(time.Since(t0))
				for _, r := range res {
					n += int64(r.New)
				}
			}
			mu.Lock()
			hist.Merge(&h)
			events += n
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return StepCost{}, fmt.Errorf("claim: %w", err)
	}
	cpu1, err := backendCPU(ctx, pool, "")
	if err != nil {
		return StepCost{}, err
	}
	return costOf(events, elapsed, cpu0, cpu1, ms(hist.Quantile(0.5))), nil
}

// measureDrain starts the real worker, on a pool of its own of
// o.WorkerConns connections, with the noop handler, on the events pending in
// the scratch database, and measures from its first done event for
// o.Window, or until none is pending.
func measureDrain(ctx context.Context, dbURL string, o *capacityOptions) (StepCost, error) {
	window := o.Window
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return StepCost{}, err
	}
	cfg.MaxConns = int32(o.WorkerConns)
	cfg.ConnConfig.RuntimeParams["application_name"] = workerApp
	wpool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return StepCost{}, err
	}
	defer wpool.Close()
	pool, err := newPool(ctx, dbURL, 1) // the measurement's own: its CPU is not counted
	if err != nil {
		return StepCost{}, err
	}
	defer pool.Close()
	w, err := worker.New(wpool, &worker.Config{
		Routes:         []worker.Route{{Source: benchSource, Handlers: []string{"noop"}}},
		Sources:        map[string]string{benchSource: river.QueueDefault},
		Queues:         map[string]int{river.QueueDefault: o.WorkerConcurrency},
		GroupMaxEvents: o.WorkerGroup,
	})
	if err != nil {
		return StepCost{}, err
	}
	if err := w.Start(ctx); err != nil {
		return StepCost{}, err
	}
	defer w.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // its figures are taken; a failed stop leaves nothing to undo
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(window + 30*time.Second) // start-up included
	for {
		if started, err := anyWithStatus(ctx, pool, "done"); err != nil || started {
			if err != nil {
				return StepCost{}, err
			}
			break
		}
		if err := waitTick(ctx, tick, deadline); err != nil {
			return StepCost{}, fmt.Errorf("drain: no event done: %w", err)
		}
	}
	cpu0, err := backendCPU(ctx, pool, workerApp)
	if err != nil {
		return StepCost{}, err
	}
	start := time.Now()
	done0, err := countDone(ctx, pool)
	if err != nil {
		return StepCost{}, err
	}
	for time.Since(start) < window {
		if err := waitTick(ctx, tick, deadline); err != nil {
			return StepCost{}, err
		}
		if more, err := anyWithStatus(ctx, pool, "pending"); err != nil || !more {
			if err != nil {
				return StepCost{}, err
			}
			break
		}
	}
	done1, err := countDone(ctx, pool)
	if err != nil {
		return StepCost{}, err
	}
	elapsed := time.Since(start)
	cpu1, err := backendCPU(ctx, pool, workerApp)
	if err != nil {
		return StepCost{}, err
	}
	if done1 <= done0 {
		return StepCost{}, errors.New("drain: no event was done in the window (claim more events: a longer --window)")
	}
	return costOf(done1-done0, elapsed, cpu0, cpu1, 0), nil
}

// waitTick waits for the next tick, or fails at deadline or when ctx ends.
func waitTick(ctx context.Context, tick *time.Ticker, deadline time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tick.C:
	}
	if time.Now().After(deadline) {
		return errors.New("deadline passed")
	}
	return nil
}

// anyWithStatus says whether an inbox row has status; the inbox's partial
// index on pending rows makes it cheap for "pending".
func anyWithStatus(ctx context.Context, pool *pgxpool.Pool, status string) (bool, error) {
	var found bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_inbox WHERE status = $1)`, status).Scan(&found)
	return found, err
}

// countDone counts the inbox's done rows.
func countDone(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'done'`).Scan(&n)
	return n, err
}

// costOf makes a StepCost of events done in elapsed, with the backends' CPU
// from cpu0 to cpu1 (negative when unknown).
func costOf(events int64, elapsed, cpu0, cpu1 time.Duration, p50 float64) StepCost {
	s := StepCost{Events: events, EventsPerSec: float64(events) / elapsed.Seconds(), P50Millis: p50}
	if cpu0 >= 0 && cpu1 >= 0 && events > 0 {
		s.ServerMicros = float64((cpu1 - cpu0).Microseconds()) / float64(events)
	}
	return s
}

// workerApp is the application_name of the drain's worker connections.
const workerApp = "hookbench capacity worker"

// backendCPU returns the CPU time of the current database's backends (of
// application app, when not empty), read from /proc, or -1 when the server
// is not on this machine. Only this database's backends count: other work on
// a shared server does not.
func backendCPU(ctx context.Context, pool *pgxpool.Pool, app string) (time.Duration, error) {
	rows, err := pool.Query(ctx, `
SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND ($1 = '' OR application_name = $1)`, app)
	if err != nil {
		return 0, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, pid := range pids {
		if !localPostgres(int(pid)) {
			return -1, nil
		}
		if d, err := readCPU(int(pid), false); err == nil {
			total += d
		}
	}
	return total, nil
}

// localPostgres says whether pid is a PostgreSQL process of this machine.
func localPostgres(pid int) bool {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.HasPrefix(string(comm), "postgres")
}
