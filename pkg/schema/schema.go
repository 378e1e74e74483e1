// Package schema applies hookinbox's SQL migrations, and River's, and checks
// at start-up that a database is new enough for this build.
//
// Migrations come in sets: the core set (package migrations) and any set a
// worker binary adds for its own tables (examples/ledger does). Each set's
// applied versions are recorded in hookinbox_migration. Applying is
// idempotent and serialised by a transaction-scoped advisory lock, so several
// pods may run `inboxctl migrate` at once, directly or through a transaction
// pooler. A migration never waits long for a table lock that live traffic
// holds: it gives up after LockTimeout, so that the queries queued behind it
// go on, and tries again later (see Migrate).
package schema

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/migrations"
)

// lockKey is the advisory lock that serialises concurrent migrators.
const lockKey int64 = 0x686f6f6b696e62 // "hookinb"

// Set is a named, ordered collection of migrations.
type Set struct {
	// Name keys the set's versions in hookinbox_migration ("core").
	Name string
	// FS holds files named NNNN_name.up.sql (down files are ignored here).
	FS fs.FS
}

// Core returns the set of hookinbox's own migrations.
func Core() *Set { return &Set{Name: "core", FS: migrations.FS} }

// migration is one parsed up-migration.
type migration struct {
	Version int
	Name    string
	SQL     string
}

var fileRE = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.up\.sql$`)

// migrations returns the set's up-migrations in version order.
func (s *Set) migrations() ([]migration, error) {
	entries, err := fs.ReadDir(s.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("schema: read %s migrations: %w", s.Name, err)
	}
	var out []migration
	for _, e := range entries {
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		sql, err := fs.ReadFile(s.FS, e.Name())
		if err != nil {
			return nil, fmt.Errorf("schema: read %s: %w", e.Name(), err)
		}
		version, _ := strconv.Atoi(m[1])
		out = append(out, migration{Version: version, Name: m[2], SQL: string(sql)})
	}
	slices.SortFunc(out, func(a, b migration) int { return cmp.Compare(a.Version, b.Version) })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("schema: %s has two migrations numbered %d", s.Name, out[i].Version)
		}
	}
	return out, nil
}

// latest returns the highest version in the set, or 0 for an empty set.
func (s *Set) latest() (int, error) {
	ms, err := s.migrations()
	if err != nil || len(ms) == 0 {
		return 0, err
	}
	return ms[len(ms)-1].Version, nil
}

// Applied is one migration applied by Migrate.
type Applied struct {
	Set     string
	Version int
	Name    string
}

// LockTimeout bounds each wait of a migration for a lock (its transaction's
// lock_timeout). A migration that alters a table needs its ACCESS EXCLUSIVE
// lock, and while it waits for a transaction that holds the table (a
// worker's, for as long as its handlers run), every query on the table
// queues behind it, the receivers' claims included. One second keeps that
// queue shorter than the tightest acknowledgement deadline a provider gives
// (Slack's 2.5 s).
const LockTimeout = time.Second

// The retries of a migration that gave up waiting for a lock: after
// lockRetryInitialDefault, then doubling up to lockRetryMaxDefault, at most
// lockAttemptsDefault attempts in all (about 3 minutes with the lock waits,
// inside the chart's migration Job deadline of 10), after which Migrate
// fails.
const (
	lockAttemptsDefault     = 10
	lockRetryInitialDefault = time.Second
	lockRetryMaxDefault     = 30 * time.Second
)

// MigrateConfig configures Migrate. A nil one is its zero value.
type MigrateConfig struct {
	// Logger logs each migration that gave up waiting for a lock and will
	// try again. Defaults to a no-op logger.
	Logger *zap.Logger

	// The lock retries' schedule; zero fields take their defaults (tests
	// shorten them).
	lockAttempts     int
	lockRetryInitial time.Duration
}

// migrator applies migrations on a pool.
type migrator struct {
	pool   *pgxpool.Pool
	config MigrateConfig
}

// Migrate applies River's migrations and then every pending migration of the
// given sets (Core first, if the caller lists it first), each in its own
// transaction. It returns what it applied; nothing when the database is
// current. A nil config is the zero MigrateConfig.
//
// The transaction of each migration of the sets waits at most LockTimeout
// for a lock. When the wait ends (another transaction held the table all
// along), it rolls back, releasing the queries queued behind it, and the
// migration is tried again after a backoff, logged at warn; after 10
// attempts in about 3 minutes Migrate fails, the migrations before it
// applied. A migration is thus applied once no transaction holds its table
// for longer than LockTimeout, never by holding up the receivers until
// none does. River's migrations run as River runs them, without the bound.
//
// Concurrent migrators are serialised by a transaction-scoped advisory lock,
// taken in a transaction of its own that stays open, on a connection of its
// own, until Migrate returns; the migrations run on other connections of
// pool, which therefore needs two. A session lock would not do: behind a
// transaction pooler (PgBouncer's pool_mode = transaction) its unlock may
// run on another server connection, leaving the lock held by a server
// connection that the pooler keeps open, and the next migrator waiting on
// it for ever. A transaction keeps its server connection until it ends, and
// its locks end with it, even when the process dies.
func Migrate(ctx context.Context, pool *pgxpool.Pool, config *MigrateConfig, sets ...*Set) ([]Applied, error) {
	if size := pool.Config().MaxConns; size < 2 {
		return nil, fmt.Errorf("schema: migrating needs a pool of at least 2 connections (one holds the lock), not %d", size)
	}
	m := &migrator{pool: pool}
	if config != nil {
		m.config = *config
	}
	if m.config.Logger == nil {
		m.config.Logger = zap.NewNop()
	}
	m.config.lockAttempts = cmp.Or(m.config.lockAttempts, lockAttemptsDefault)
	m.config.lockRetryInitial = cmp.Or(m.config.lockRetryInitial, lockRetryInitialDefault)

	lock, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("schema: begin the migration lock's transaction: %w", err)
	}
	// It wrote nothing: ending it is all that matters, and a broken
	// connection ends it too.
	defer lock.Rollback(context.WithoutCancel(ctx))
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
		return nil, fmt.Errorf("schema: take migration lock: %w", err)
	}

	var applied []Applied
	riverMigrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("schema: river migrator: %w", err)
	}
	// River's migrations run as River runs them: its variant that runs them
	// in a transaction of the caller's, where the lock timeout could be set,
	// is deprecated (some of them cannot share a transaction).
	res, err := riverMigrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("schema: river migrations: %w", err)
	}
	for _, v := range res.Versions {
		applied = append(applied, Applied{Set: "river", Version: v.Version, Name: v.Name})
	}

	if _, err := pool.Exec(ctx, createVersionTable); err != nil {
		return nil, fmt.Errorf("schema: create hookinbox_migration: %w", err)
	}
	for _, set := range sets {
		done, err := appliedVersions(ctx, pool, set.Name)
		if err != nil {
			return nil, err
		}
		ms, err := set.migrations()
		if err != nil {
			return nil, err
		}
		for _, mig := range ms {
			if done[mig.Version] {
				continue
			}
			if err := m.apply(ctx, set.Name, mig); err != nil {
				return nil, err
			}
			applied = append(applied, Applied{Set: set.Name, Version: mig.Version, Name: mig.Name})
		}
	}
	return applied, nil
}

// lockTimeoutSQL sets a migration transaction's lock_timeout.
var lockTimeoutSQL = fmt.Sprintf("SET LOCAL lock_timeout = %d", LockTimeout.Milliseconds())

// inTx runs fn in a transaction whose lock waits end after LockTimeout.
// When one does, it rolls back and runs it again, in a new transaction,
// after a backoff, logging the retry, up to the configured attempts.
// migration names what fn applies, for the log and the error.
func (m *migrator) inTx(ctx context.Context, migration string, fn func(pgx.Tx) error) error {
	delay := m.config.lockRetryInitial
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockTimeoutSQL); err != nil {
				return err
			}
			return fn(tx)
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.LockNotAvailable {
			return err
		}
		if attempt >= m.config.lockAttempts {
			return fmt.Errorf("gave up after %d attempts, each waiting %s for a lock other transactions held throughout: %w",
				attempt, LockTimeout, err)
		}
		m.config.Logger.Warn("migration gave up waiting for a lock, releasing the queries queued behind it; retrying",
			zap.String("migration", migration), zap.Int("attempt", attempt), zap.Duration("lock_timeout", LockTimeout),
			zap.Duration("retry_in", delay), zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, lockRetryMaxDefault)
	}
}

const createVersionTable = `
CREATE TABLE IF NOT EXISTS hookinbox_migration (
    set_name   text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (set_name, version)
)`

// apply applies mig and records it, in one transaction (see inTx).
func (m *migrator) apply(ctx context.Context, setName string, mig migration) error {
	name := fmt.Sprintf("%s %04d_%s", setName, mig.Version, mig.Name)
	err := m.inTx(ctx, name, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, mig.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx,
			"INSERT INTO hookinbox_migration (set_name, version, name) VALUES ($1, $2, $3)",
			setName, mig.Version, mig.Name)
		return err
	})
	if err != nil {
		return fmt.Errorf("schema: apply %s: %w", name, err)
	}
	return nil
}

func appliedVersions(ctx context.Context, pool *pgxpool.Pool, setName string) (map[int]bool, error) {
	rows, err := pool.Query(ctx, "SELECT version FROM hookinbox_migration WHERE set_name = $1", setName)
	if err != nil {
		return nil, fmt.Errorf("schema: read applied versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("schema: read applied versions: %w", err)
	}
	done := make(map[int]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}
