package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// defaults is the product's configuration with nothing set: what the
// benchmark's receivers and workers run with unless a phase says otherwise.
var defaults = func() *config.Config {
	var c config.Config
	c.ApplyDefaults()
	return &c
}()

// ackTimeout is the receiver's ack_timeout: the benchmark keeps the default.
var ackTimeout = defaults.Receiver.AckTimeout

// bench is one benchmark run: its database, its subprocesses, its report.
type bench struct {
	opts     *options
	adminURL string
	dbName   string
	dbURL    string
	// pool is hookbench's own small pool on the benchmark database, for
	// counting, preloading and resetting between phases.
	pool *pgxpool.Pool
	// store counts the inbox's rows by status, on pool.
	store *inboxstore.Store
	// dir holds the processes' configs and logs.
	dir string
	// postmaster is the local server's pid, 0 when not local; its CPU time
	// is reported per phase.
	postmaster int
	live       map[*Proc]bool
	report     *Report
	failed     bool
}

// newBench creates and migrates the benchmark database.
func newBench(ctx context.Context, opts *options, adminURL string) (*bench, error) {
	b := &bench{opts: opts, adminURL: adminURL, live: map[*Proc]bool{}}
	b.report = newReport(opts)
	for _, name := range []string{"receiver", "worker", "ledger"} {
		if _, err := os.Stat(filepath.Join(opts.Bin, name)); err != nil {
			return nil, fmt.Errorf("%s/%s is missing (build it first, or run `make bench`): %w", opts.Bin, name, err)
		}
	}
	var err error
	if b.dir, err = os.MkdirTemp("", "hookbench-"); err != nil {
		return nil, err
	}
	b.dbName = "hookbench_" + strconv.FormatInt(time.Now().Unix(), 10)
	if b.dbURL, err = createDatabase(ctx, adminURL, b.dbName); err != nil {
		b.close()
		return nil, err
	}
	progress("database %s created; logs and configs in %s", b.dbName, b.dir)
	if b.pool, err = newPool(ctx, b.dbURL, 8); err != nil {
		b.close()
		return nil, err
	}
	b.store = inboxstore.New(b.pool)
	if err := b.migrate(ctx); err != nil {
		b.close()
		return nil, err
	}
	b.report.Machine = machineInfo(ctx, b.pool)
	b.postmaster = b.report.Machine.postmaster
	return b, nil
}

// migrate applies River's, the core's and the ledger's migrations to the
// benchmark database, with the ledger binary's own migrate command.
func (b *bench) migrate(ctx context.Context) error { return b.migrateDB(ctx, b.dbURL) }

// migrateDB migrates the database dbURL names.
func (b *bench) migrateDB(ctx context.Context, dbURL string) error {
	cfg, err := writeConfig(b.dir, "migrate", procConfig{ReceiverAddr: "127.0.0.1:0", WorkerAddr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(b.opts.Bin, "ledger"), "migrate", "--config", cfg)
	cmd.Env = append(os.Environ(), "HOOKINBOX_DATABASE_URL="+dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ledger migrate: %w\n%s", err, out)
	}
	return nil
}

// close stops what is still running and drops the database.
func (b *bench) close() {
	for p := range b.live {
		_ = p.Stop(10 * time.Second)
	}
	if b.pool != nil {
		b.pool.Close()
	}
	if b.dbURL != "" && !b.opts.KeepDB {
		// The scale phase's empty twin too, in case a failure skipped its own drop.
		for _, name := range []string{b.dbName, b.dbName + "_empty"} {
			if err := dropDatabase(b.adminURL, name); err != nil {
				progress("could not drop database %s: %v", name, err)
			}
		}
	}
	if b.dir != "" {
		if b.failed {
			progress("process logs kept in %s", b.dir)
		} else {
			os.RemoveAll(b.dir)
		}
	}
}

// startReceiver starts a receiver with pc (addresses filled in) and waits
// until it is ready.
func (b *bench) startReceiver(ctx context.Context, name string, pc procConfig) (*Proc, string, error) {
	p, pc, err := b.launch(name, "receiver", pc)
	if err != nil {
		return nil, "", err
	}
	if err := p.waitReady(ctx, "http://"+pc.ReceiverAddr+"/readyz", 30*time.Second); err != nil {
		b.release(p)
		return nil, "", err
	}
	return p, "http://" + pc.ReceiverAddr + "/webhooks/" + benchSource, nil
}

// startWorker starts a worker binary ("worker" or "ledger") routing every
// event to handler, without waiting for it: a drain's clock includes the
// start-up.
func (b *bench) startWorker(name, binary, handler string) (p *Proc, readyURL string, err error) {
	return b.startWorkerWith(name, binary, procConfig{Handler: handler})
}

// startWorkerWith is startWorker with the worker's settings in pc.
func (b *bench) startWorkerWith(name, binary string, pc procConfig) (p *Proc, readyURL string, err error) {
	p, pc, err = b.launch(name, binary, pc)
	return p, "http://" + pc.WorkerAddr + "/readyz", err
}

// launch starts binary from --bin with pc, its listen addresses filled in
// and returned, on pc's database (the benchmark's by default).
func (b *bench) launch(name, binary string, pc procConfig) (*Proc, procConfig, error) {
	var err error
	if pc.ReceiverAddr, err = freeAddr(); err != nil {
		return nil, pc, err
	}
	if pc.WorkerAddr, err = freeAddr(); err != nil {
		return nil, pc, err
	}
	cfg, err := writeConfig(b.dir, name, pc)
	if err != nil {
		return nil, pc, err
	}
	path, args := filepath.Join(b.opts.Bin, binary), []string{"--config", cfg}
	p, err := b.startOn(cmp.Or(pc.DatabaseURL, b.dbURL), name, path, args)
	return p, pc, err
}

// startOn starts a process on the database dbURL names.
func (b *bench) startOn(dbURL, name, path string, args []string) (*Proc, error) {
	p, err := startProc(name, path, args, []string{"HOOKINBOX_DATABASE_URL=" + dbURL}, b.dir)
	if err != nil {
		return nil, err
	}
	b.live[p] = true
	return p, nil
}

// stop stops p, records its peak RSS in the report, and returns its error.
func (b *bench) stop(p *Proc) error {
	delete(b.live, p)
	err := p.Stop(40 * time.Second)
	if p.peakRSS > 0 {
		b.report.PeakRSS[p.Name] = mb(p.peakRSS)
	}
	return err
}

// release stops p where a stop error has nowhere to go: on a path that
// already returns an error, or after a phase whose figures are taken.
func (b *bench) release(p *Proc) { _ = b.stop(p) }

func mb(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// progress prints a line of progress to standard error.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hookbench %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
