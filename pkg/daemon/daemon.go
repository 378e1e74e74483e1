// Package daemon wires hookinbox's processes together from the config: flag
// and config loading, the logger, the connection pool, the schema check, the
// receiver and worker servers, and signal handling. cmd/ packages and worker
// binaries built on pkg/worker (examples/ledger) call it and do nothing else.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/logging"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// Env is what every process starts with.
type Env struct {
	Config *config.Config
	Logger *zap.Logger
	Pool   *pgxpool.Pool
}

// Close releases the pool and flushes the logger.
func (e *Env) Close() {
	if e.Pool != nil {
		e.Pool.Close()
	}
	_ = e.Logger.Sync()
}

// LoadConfig parses --config from args (falling back to HOOKINBOX_CONFIG) and
// loads the config, demanding what needs names (see config.Needs). It
// returns the remaining arguments. The config's Warnings are the caller's to
// report.
func LoadConfig(name string, args []string, needs config.Needs) (*config.Config, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fs.String("config", "", "config file (default: $HOOKINBOX_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(*path, needs)
	if err != nil {
		return nil, nil, err
	}
	return cfg, fs.Args(), nil
}

// Boot loads the config demanding what needs names and the database (see
// config.Needs), builds the logger and logs the config's warnings, connects
// to PostgreSQL with at least minConns(config) connections (minConns may be
// nil), and, unless sets is nil, refuses to go on when the schema is older
// than sets (and River) need.
func Boot(ctx context.Context, name string, args []string, needs config.Needs, minConns func(*config.Config) int32, sets []*schema.Set) (*Env, []string, error) {
	cfg, rest, err := LoadConfig(name, args, needs|config.NeedDatabase)
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
	env := &Env{Config: cfg, Logger: logger}

	poolCfg, err := pgxpool.ParseConfig(cfg.Database.URL)
	if err != nil {
		// pgx's message may quote the URL; say which key is wrong instead.
		return nil, nil, errors.New("database.url: not a valid PostgreSQL connection string")
	}
	poolCfg.MaxConns = cfg.Database.MaxConns
	if minConns != nil {
		poolCfg.MaxConns = max(poolCfg.MaxConns, minConns(cfg))
	}
	env.Pool, err = pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if sets != nil {
		checkCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := schema.Check(checkCtx, env.Pool, sets...); err != nil {
			env.Close()
			return nil, nil, err
		}
	}
	logger.Info("starting", zap.Any("config", cfg.Redacted()), zap.Int32("pool_max_conns", poolCfg.MaxConns))
	return env, rest, nil
}

// Main runs fn with a context that SIGINT and SIGTERM cancel, and exits the
// process: 0 on success, 1 with the error on standard error otherwise.
func Main(fn func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := fn(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
		os.Exit(1)
	}
}
