package schema_test

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/migrations"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// coreUpTo returns the core set cut after version last: the database as a
// release from before the next migration left it.
func coreUpTo(t *testing.T, last int) *schema.Set {
	t.Helper()
	files := fstest.MapFS{}
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	for _, e := range entries {
		var version int
		if _, err := fmt.Sscanf(e.Name(), "%04d_", &version); err != nil || version > last {
			continue
		}
		data, err := fs.ReadFile(migrations.FS, e.Name())
		require.NoError(t, err)
		files[e.Name()] = &fstest.MapFile{Data: data}
	}
	return &schema.Set{Name: schema.Core().Name, FS: files}
}

// holdInbox returns a database migrated up to 0010, before 0011 alters
// webhook_inbox, and a worker's transaction holding the table with the
// lock its UPDATEs take, rolled back when the test ends.
func holdInbox(t *testing.T) (*dbtest.DB, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	_, err := schema.Migrate(ctx, db.Pool, nil, coreUpTo(t, 10))
	require.NoError(t, err)
	worker, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = worker.Rollback(context.WithoutCancel(ctx)) })
	_, err = worker.Exec(ctx, `LOCK TABLE webhook_inbox IN ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	return db, worker
}

// TestMigrateDoesNotStallClaims is issue 38's suspected point on migration
// 0011: its renames need webhook_inbox's ACCESS EXCLUSIVE lock, and a
// migration waiting for it queues every claim behind it, so one long worker
// transaction stalled the receivers for as long as it lasted. A claim
// statement runs over and over while a worker transaction holds the table
// for longFor; none may wait much longer than the migration's lock_timeout,
// and the migration must be done once the transaction ends.
func TestMigrateDoesNotStallClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, worker := holdInbox(t)
	const longFor = 5 * time.Second
	ended := make(chan time.Time, 1)
	time.AfterFunc(longFor, func() {
		_ = worker.Commit(ctx)
		ended <- time.Now()
	})

	core, logs := observer.New(zap.WarnLevel)
	migrated := make(chan error, 1)
	go func() {
		_, err := schema.Migrate(ctx, db.Pool, &schema.MigrateConfig{Logger: zap.New(core)}, schema.Core())
		migrated <- err
	}()

	// The receiver's claims meanwhile, on a connection of their own.
	claimer, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = claimer.Close(context.WithoutCancel(ctx)) })
	var (
		claims  int
		slowest time.Duration
	)
	for start := time.Now(); time.Since(start) < longFor; claims++ {
		began := time.Now()
		// The claim's INSERT, its bytes left out: the columns both
		// schemas have.
		_, err := claimer.Exec(ctx, `INSERT INTO webhook_inbox (source, provider, event_id) VALUES ('bank', 'standardwebhooks', $1)
ON CONFLICT DO NOTHING`, fmt.Sprintf("evt_%d", claims))
		require.NoError(t, err)
		slowest = max(slowest, time.Since(began))
	}
	endedAt := <-ended
	t.Logf("%d claims while a worker transaction held webhook_inbox for %s; the slowest took %s", claims, longFor, slowest)
	require.NoError(t, <-migrated)
	t.Logf("migration done %s after the transaction ended, after %d retries", time.Since(endedAt), logs.Len())
	require.NoError(t, schema.Check(ctx, db.Pool, schema.Core()))
	require.Less(t, slowest, schema.LockTimeout+time.Second, "a claim queued behind the migration's lock for longer than its lock_timeout")
	// The migration did wait for the transaction, and gave up each time.
	require.NotZero(t, logs.Len())
	for _, entry := range logs.All() {
		require.Equal(t, "core 0011_delivery", entry.ContextMap()["migration"], entry.Message)
	}
}

// TestMigrateGivesUpOnALockHeldThroughout checks that the retries are
// bounded: a migration whose table a transaction holds throughout fails,
// naming the migration, with the migrations before it applied and its
// own not.
func TestMigrateGivesUpOnALockHeldThroughout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := holdInbox(t)

	core, logs := observer.New(zap.WarnLevel)
	config := schema.MigrateConfig{Logger: zap.New(core)}
	_, err := schema.Migrate(ctx, db.Pool, config.WithLockRetries(2, 10*time.Millisecond), schema.Core())
	require.ErrorContains(t, err, "schema: apply core 0011_delivery: gave up after 2 attempts, each waiting 1s for a lock")
	require.Equal(t, 1, logs.Len(), "one retry logged")
	var version int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT max(version) FROM hookinbox_migration WHERE set_name = 'core'`).Scan(&version))
	require.Equal(t, 10, version)
}
