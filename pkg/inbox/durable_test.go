package inbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// withSynchronousCommit sets synchronous_commit for db's database, as a
// managed-PostgreSQL user may (ALTER DATABASE … SET), and returns a pool
// whose sessions start with that setting.
func withSynchronousCommit(t *testing.T, db *dbtest.DB, url, setting string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET synchronous_commit = %s`, db.Name, setting))
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var session string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&session))
	require.Equal(t, setting, session, "the database's setting in a new session")
	return pool
}

// TestClaimCommitsDurably checks, in the real store, the setting under
// which the receiver's claim commits: a trigger on webhook_inbox records
// synchronous_commit as the claim's INSERT sees it. off, whatever set it,
// is raised to on; every other value already waits for the WAL flush and
// is kept, remote_apply included.
func TestClaimCommitsDurably(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ database, claim string }{
		{"off", "on"}, {"local", "local"}, {"on", "on"}, {"remote_write", "remote_write"}, {"remote_apply", "remote_apply"},
	} {
		t.Run("DatabaseSetTo_"+tc.database, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := dbtest.New(t)
			_, err := db.Pool.Exec(ctx, `
CREATE TABLE claim_setting (event_id text, synchronous_commit text);
CREATE FUNCTION record_claim_setting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO claim_setting VALUES (NEW.event_id, current_setting('synchronous_commit'));
    RETURN NEW;
END $$;
CREATE TRIGGER record_claim_setting AFTER INSERT ON webhook_inbox
    FOR EACH ROW EXECUTE FUNCTION record_claim_setting()`)
			require.NoError(t, err)
			pool := withSynchronousCommit(t, db, db.URL, tc.database)
			client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
			require.NoError(t, err)
			ingester := inbox.NewIngester(pool, client, &inbox.IngesterConfig{})

			_, err = ingester.Ingest(ctx, delivery(event("msg_one")))
			require.NoError(t, err)
			_, err = ingester.IngestGroup(ctx, []*inbox.Delivery{delivery(event("msg_g1")), delivery(event("msg_g2"))})
			require.NoError(t, err)

			rows, err := db.Pool.Query(ctx, `SELECT event_id || ' ' || synchronous_commit FROM claim_setting ORDER BY event_id`)
			require.NoError(t, err)
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, []string{"msg_g1 " + tc.claim, "msg_g2 " + tc.claim, "msg_one " + tc.claim}, got)
		})
	}
}

// TestDurableTxOptions checks the durable BEGIN in each query mode, both
// directly and through PgBouncer in transaction mode: off is on inside the
// transaction, remote_apply stays remote_apply, and the setting does not
// outlive the transaction on the (pooled) server connection.
func TestDurableTxOptions(t *testing.T) {
	t.Parallel()
	bouncer := dbtest.StartPgBouncer(t)
	for _, via := range []string{"direct", "pgbouncer"} {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
			for _, tc := range []struct{ database, inside string }{{"off", "on"}, {"remote_apply", "remote_apply"}} {
				t.Run(fmt.Sprintf("%s/%s/%s", via, mode, tc.database), func(t *testing.T) {
					t.Parallel()
					ctx := context.Background()
					db := dbtest.New(t)
					url := db.URL
					if via == "pgbouncer" {
						url = bouncer.URL(t, db)
					}
					withSynchronousCommit(t, db, url, tc.database)
					config, err := pgxpool.ParseConfig(url)
					require.NoError(t, err)
					config.ConnConfig.DefaultQueryExecMode = mode
					config.MaxConns = 1
					pool, err := pgxpool.NewWithConfig(ctx, config)
					require.NoError(t, err)
					defer pool.Close()

					for range 2 {
						var inside string
						require.NoError(t, inbox.BeginDurableFunc(ctx, pool, func(tx pgx.Tx) error {
							return tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&inside)
						}))
						require.Equal(t, tc.inside, inside)
						var after string
						require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&after))
						require.Equal(t, tc.database, after, "the setting after the transaction")
					}
				})
			}
		}
	}
}
