package schema_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EmptyDatabaseIsTooOldUntilMigrated", func(t *testing.T) {
		t.Parallel()
		db := dbtest.NewEmpty(t)
		err := schema.Check(ctx, db.Pool, schema.Core())
		require.ErrorIs(t, err, schema.ErrTooOld)
		require.EqualError(t, err, "the database has no hookinbox schema")

		applied, err := schema.Migrate(ctx, db.Pool, nil, schema.Core())
		require.NoError(t, err)
		var sets []string
		for _, a := range applied {
			sets = append(sets, a.Set)
		}
		require.Contains(t, sets, "river")
		require.Contains(t, sets, "core")
		require.NoError(t, schema.Check(ctx, db.Pool, schema.Core()))
	})

	t.Run("MigrateIsIdempotent", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		applied, err := schema.Migrate(ctx, db.Pool, nil, schema.Core())
		require.NoError(t, err)
		require.Empty(t, applied)
	})

	t.Run("ConcurrentMigratorsApplyEachMigrationOnce", func(t *testing.T) {
		t.Parallel()
		db := dbtest.NewEmpty(t)
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := schema.Migrate(ctx, db.Pool, nil, schema.Core())
				errs <- err
			}()
		}
		for range 3 {
			require.NoError(t, <-errs)
		}
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_migration WHERE set_name = 'core'`).Scan(&n))
		// Counted against the set's migrations, not its latest number: a
		// branch may add a later number before the ones between are merged.
		ms, err := schema.Core().Migrations()
		require.NoError(t, err)
		require.Len(t, ms, n)
	})

	t.Run("MissingMigrationOfAnotherSetIsTooOld", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		extra := &schema.Set{Name: "extra", FS: fstest.MapFS{
			"0001_things.up.sql": {Data: []byte(`CREATE TABLE things (id int)`)},
		}}
		err := schema.Check(ctx, db.Pool, schema.Core(), extra)
		require.ErrorIs(t, err, schema.ErrTooOld)
		require.EqualError(t, err, "database schema is older than this build needs (extra is at version 0, this build needs 1)")
		_, err = schema.Migrate(ctx, db.Pool, nil, schema.Core(), extra)
		require.NoError(t, err)
		require.NoError(t, schema.Check(ctx, db.Pool, schema.Core(), extra))
	})

	t.Run("NewerSchemaIsAccepted", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		// A rolling upgrade migrated ahead of this build.
		_, err := db.Pool.Exec(ctx, `INSERT INTO hookinbox_migration (set_name, version, name) VALUES ('core', 9999, 'future')`)
		require.NoError(t, err)
		require.NoError(t, schema.Check(ctx, db.Pool, schema.Core()))
	})

	t.Run("FailedMigrationLeavesNoTrace", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		broken := &schema.Set{Name: "broken", FS: fstest.MapFS{
			"0001_half.up.sql": {Data: []byte(`CREATE TABLE half (id int); SELECT no_such_function();`)},
		}}
		_, err := schema.Migrate(ctx, db.Pool, nil, broken)
		require.ErrorContains(t, err, "0001_half")
		var exists bool
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT to_regclass('half') IS NOT NULL`).Scan(&exists))
		require.False(t, exists)
	})
}

func TestSetMigrations(t *testing.T) {
	t.Parallel()
	set := &schema.Set{Name: "t", FS: fstest.MapFS{
		"0002_b.up.sql":   {Data: []byte("B")},
		"0001_a.up.sql":   {Data: []byte("A")},
		"0001_a.down.sql": {Data: []byte("-A")},
		"README.md":       {Data: []byte("not a migration")},
	}}
	ms, err := set.Migrations()
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, schema.Migration{Version: 1, Name: "a", SQL: "A"}, ms[0])
	require.Equal(t, 2, ms[1].Version)

	dup := &schema.Set{Name: "d", FS: fstest.MapFS{
		"0001_a.up.sql": {Data: []byte("A")},
		"0001_b.up.sql": {Data: []byte("B")},
	}}
	_, err = dup.Migrations()
	require.ErrorContains(t, err, "two migrations numbered 1")
}

// TestMigrateThroughPgBouncer runs concurrent migrators through PgBouncer in
// transaction pooling mode, where a session advisory lock would be taken on
// one server connection and released (or not) on another.
func TestMigrateThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bouncer := dbtest.StartPgBouncer(t)
	db := dbtest.NewEmpty(t)
	cfg, err := pgxpool.ParseConfig(bouncer.URL(t, db))
	require.NoError(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := schema.Migrate(ctx, pool, nil, schema.Core())
			errs <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_migration WHERE set_name = 'core'`).Scan(&n))
	latest, err := schema.Core().Latest()
	require.NoError(t, err)
	require.Equal(t, latest, n)

	// No server connection that PgBouncer keeps still holds the lock: the
	// next migrator gets it at once, whichever connection it is lent.
	var held int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held))
	require.Zero(t, held)
	applied, err := schema.Migrate(ctx, pool, nil, schema.Core())
	require.NoError(t, err)
	require.Empty(t, applied)
	require.NoError(t, schema.Check(ctx, pool, schema.Core()))
}

func TestMigrateNeedsTwoConnections(t *testing.T) {
	t.Parallel()
	db := dbtest.NewEmpty(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = schema.Migrate(context.Background(), pool, nil, schema.Core())
	require.EqualError(t, err, "schema: migrating needs a pool of at least 2 connections (one holds the lock), not 1")
}
