// Package schema applies hookinbox's SQL migrations, and River's, and checks
// at start-up that a database is new enough for this build.
//
// Migrations come in sets: the core set (package migrations) and any set a
// worker binary adds for its own tables (examples/ledger does). Each set's
// applied versions are recorded in hookinbox_migration. Applying is
// idempotent and serialised by a transaction-scoped advisory lock, so several
// pods may run `inboxctl migrate` at once, directly or through a transaction
// pooler.
package schema

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

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

// Migrate applies River's migrations and then every pending migration of the
// given sets (Core first, if the caller lists it first), each in its own
// transaction. It returns what it applied; nothing when the database is
// current.
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
func Migrate(ctx context.Context, pool *pgxpool.Pool, sets ...*Set) ([]Applied, error) {
	if size := pool.Config().MaxConns; size < 2 {
		return nil, fmt.Errorf("schema: migrating needs a pool of at least 2 connections (one holds the lock), not %d", size)
	}
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
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("schema: river migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
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
		for _, m := range ms {
			if done[m.Version] {
				continue
			}
			if err := apply(ctx, pool, set.Name, m); err != nil {
				return nil, err
			}
			applied = append(applied, Applied{Set: set.Name, Version: m.Version, Name: m.Name})
		}
	}
	return applied, nil
}

const createVersionTable = `
CREATE TABLE IF NOT EXISTS hookinbox_migration (
    set_name   text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (set_name, version)
)`

func apply(ctx context.Context, pool *pgxpool.Pool, setName string, m migration) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("schema: apply %s %04d_%s: %w", setName, m.Version, m.Name, err)
		}
		_, err := tx.Exec(ctx,
			"INSERT INTO hookinbox_migration (set_name, version, name) VALUES ($1, $2, $3)",
			setName, m.Version, m.Name)
		return err
	})
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
