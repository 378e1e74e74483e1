package dbtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// SetSynchronousCommit sets synchronous_commit for db's database, as a
// managed-PostgreSQL user may (ALTER DATABASE … SET), and returns a new
// pool on url (db.URL, or PgBouncer's URL for db) whose sessions start with
// that setting, closed when the test ends.
func SetSynchronousCommit(tb testing.TB, db *DB, url, setting string) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET synchronous_commit = %s`, db.Name, setting))
	require.NoError(tb, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	var session string
	require.NoError(tb, pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&session))
	require.Equal(tb, setting, session, "the database's setting in a new session")
	return pool
}

// RecordSynchronousCommit puts a trigger on each of tables that records,
// for every row written, the synchronous_commit in force in the writing
// transaction. The function it returns lists what was recorded so far, as
// "table OP setting" (OP is INSERT, UPDATE or DELETE), each once, in the
// order first seen.
func RecordSynchronousCommit(tb testing.TB, db *DB, tables ...string) func() []string {
	tb.Helper()
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
CREATE TABLE dbtest_commit_setting (n bigserial, what text NOT NULL);
CREATE FUNCTION dbtest_record_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dbtest_commit_setting (what) VALUES (TG_TABLE_NAME || ' ' || TG_OP || ' ' || current_setting('synchronous_commit'));
    RETURN NULL;
END $$`)
	require.NoError(tb, err)
	for _, table := range tables {
		_, err := db.Pool.Exec(ctx, fmt.Sprintf(`CREATE TRIGGER dbtest_record_commit_setting AFTER INSERT OR UPDATE OR DELETE ON %s
    FOR EACH ROW EXECUTE FUNCTION dbtest_record_commit_setting()`, pgx.Identifier{table}.Sanitize()))
		require.NoError(tb, err)
	}
	return func() []string {
		tb.Helper()
		rows, err := db.Pool.Query(ctx, `SELECT what FROM dbtest_commit_setting GROUP BY what ORDER BY min(n)`)
		require.NoError(tb, err)
		seen, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(tb, err)
		return seen
	}
}
