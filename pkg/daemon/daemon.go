// Package daemon wires hookinbox's processes together from the config: flag
// and config loading, the logger, the connection pool, the schema check, the
// receiver and worker servers, and signal handling. cmd/ packages and worker
// binaries built on pkg/worker (examples/ledger) call it and do nothing else.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/buildinfo"
	"github.com/hookinbox/hookinbox/internal/logging"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// The bound on each connection attempt to a PostgreSQL host when
// database.url sets no connect_timeout, so that an unreachable host fails
// an attempt instead of hanging it: connectTimeoutDefault for one host, and
// connectTimeoutHostsDefault for each of several (a multi-host URL for a
// failover), where a host that hangs (a partition, a dead machine) costs
// every new connection this long before the next host is tried. Fault
// scenario 13's hanging primary, with the 10 s: 503 for 14.2 s, 10.0 s of
// them after the promotion; with 2 s: 6.1 to 6.5 s, and 1.9 to 2.3 s.
const (
	connectTimeoutDefault      = 10 * time.Second
	connectTimeoutHostsDefault = 2 * time.Second
)

// Env is what every process starts with.
type Env struct {
	Config *config.Config
	Logger *zap.Logger
	// Pool is connected lazily: Boot does not reach the database.
	Pool *pgxpool.Pool
	// Name is the binary's name, as given to Boot ("receiver", "ledger").
	Name string
	// ConfigPath is the --config argument, empty when none was given.
	ConfigPath string
	// Sets are the migration sets this binary needs: what Migrate applies,
	// and what CheckSchema, RunReceiver and RunWorker check.
	Sets []*schema.Set
	// Retry is the daemons' start-up retry schedule; zero fields take their
	// defaults.
	Retry Retry
	// MetricsCache is how long one reading of the backlog from the database
	// answers /metrics scrapes; zero means metrics.BacklogCacheDefault.
	MetricsCache time.Duration
	// TracerProvider traces the receiver and the worker; nil traces
	// nothing. RunReceiver and RunWorker set it from the config's tracing
	// section (see startTracing) unless it is set already (a test's).
	TracerProvider trace.TracerProvider

	metrics *prometheus.Registry // see Metrics
	outbox  *metrics.Outbox      // see outboxMetrics
}

// Close releases the pool and flushes the logger.
func (e *Env) Close() {
	if e.Pool != nil {
		e.Pool.Close()
	}
	_ = e.Logger.Sync()
}

// Verbs says what each of a binary's commands demands of the config (see
// config.Needs), by verb; "" is the binary run without one. Boot adds
// config.NeedDatabase to all of them, and an unknown verb demands only that.
type Verbs map[string]config.Needs

// loadConfig parses --config from args (before or after the verb, see
// parseArgs; falling back to HOOKINBOX_CONFIG) and loads the config,
// demanding what the verb needs.
func loadConfig(name string, args []string, verbs Verbs) (cfg *config.Config, path string, rest []string, err error) {
	path, rest, err = parseArgs(name, args)
	if err != nil {
		return nil, "", nil, err
	}
	verb := ""
	if len(rest) > 0 {
		verb = rest[0]
	}
	cfg, err = config.Load(path, verbs[verb]|config.NeedDatabase)
	if err != nil {
		return nil, "", nil, err
	}
	return cfg, path, rest, nil
}

// BootConfig is what Boot needs to know of the binary. Its zero value
// boots a binary named "hookinbox" with no verbs and the core schema.
type BootConfig struct {
	// Name is the binary's name ("receiver", "ledger"): the logger's name,
	// and the name in messages. Defaults to "hookinbox".
	Name string
	// Args are the command-line arguments after the program's name
	// (os.Args[1:], as Main passes them); --config is taken from them,
	// before or after the verb. Defaults to none.
	Args []string
	// Verbs says what each of the binary's verbs demands of the config; ""
	// is the binary run without one. Defaults to none: every verb demands
	// only the database.
	Verbs Verbs
	// Sets are the migration sets the binary needs: schema.Core(), and a
	// worker binary's own. Defaults to [schema.Core()].
	Sets []*schema.Set
}

// Boot loads the config named by --config in c.Args, demanding what c.Verbs
// says the verb needs; builds the logger and logs the config's warnings; and
// builds the connection pool. It does not reach the database: RunReceiver
// and RunWorker wait for it, Migrate and CheckSchema try once. It returns the
// arguments left after --config: the verb first, then its own. A nil c is
// the zero BootConfig.
func Boot(ctx context.Context, c *BootConfig) (*Env, []string, error) {
	if c == nil {
		c = &BootConfig{}
	}
	name := cmp.Or(c.Name, "hookinbox")
	sets := c.Sets
	if len(sets) == 0 {
		sets = []*schema.Set{schema.Core()}
	}
	cfg, path, rest, err := loadConfig(name, c.Args, c.Verbs)
	if err != nil {
		return nil, nil, err
	}
	logger, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return nil, nil, err
	}
	logger = logger.Named(name)
	for _, warning := range cfg.Warnings() {
		logger.Warn(warning)
	}
	env := &Env{Config: cfg, Logger: logger, Name: name, ConfigPath: path, Sets: sets}

	poolCfg, err := pgxpool.ParseConfig(cfg.Database.URL.Reveal())
	if err != nil {
		// pgx's message may quote the URL; say which key is wrong instead.
		return nil, nil, errors.New("database.url: not a valid PostgreSQL connection string")
	}
	poolCfg.MaxConns = cfg.Database.MaxConns
	if poolCfg.ConnConfig.ConnectTimeout == 0 {
		poolCfg.ConnConfig.ConnectTimeout = connectTimeoutDefault
		if severalHosts(poolCfg.ConnConfig) {
			poolCfg.ConnConfig.ConnectTimeout = connectTimeoutHostsDefault
		}
	}
	// database.query_mode: behind a transaction pooler, a mode whose every
	// round trip stands alone (see docs/pgbouncer.md).
	poolCfg.ConnConfig.DefaultQueryExecMode = cfg.Database.QueryExecMode()
	env.Pool, err = pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("database: %w", err)
	}
	// The daemons log it again at info when they start; a CLI stays quiet.
	logger.Debug("loaded config", zap.Any("config", cfg.Redacted()), zap.Int32("pool_max_conns", poolCfg.MaxConns),
		zap.String("query_mode", cfg.Database.QueryMode))
	return env, rest, nil
}

// severalHosts reports whether c names more than one host (a fallback of
// the same host is sslmode=prefer's attempt without TLS).
func severalHosts(c *pgx.ConnConfig) bool {
	for _, fb := range c.Fallbacks {
		if fb.Host != c.Host || fb.Port != c.Port {
			return true
		}
	}
	return false
}

// MigrateCommand is the command that applies e.Sets, for messages: `NAME
// migrate` when the binary brings a set of its own (a worker binary such as
// examples/ledger), `inboxctl migrate` otherwise; with --config when one was
// given.
func (e *Env) MigrateCommand() string {
	name := "inboxctl"
	for _, s := range e.Sets {
		if s.Name != schema.Core().Name && e.Name != "" {
			name = e.Name
		}
	}
	cmd := name + " migrate"
	if e.ConfigPath != "" {
		path := e.ConfigPath
		if strings.ContainsAny(path, " \t'\"\\$`") {
			path = fmt.Sprintf("%q", path)
		}
		cmd += " --config " + path
	}
	return cmd
}

// Main runs fn with a context that SIGINT and SIGTERM cancel, and exits the
// process: 0 on success, 1 with the error on standard error otherwise. When
// fn returns ErrVersion (Boot does, for --version), it prints the binary's
// name and version and exits 0.
func Main(fn func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := fn(ctx, os.Args[1:])
	stop()
	if errors.Is(err, ErrVersion) {
		fmt.Printf("%s %s\n", filepath.Base(os.Args[0]), buildinfo.Version())
		return
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
		os.Exit(1)
	}
}
