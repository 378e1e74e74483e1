package inboxstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestClaimCommitsDurably checks, in the real store, the setting under
// which the receiver's claim commits, per delivery and as a group commit:
// a trigger records synchronous_commit as the claim's writes see it. off
// and local (which never wait for a synchronous standby), whatever set
// them, are raised to on, and so is remote_write unless the claim keeps it
// (DurabilityConfig.KeepRemoteWrite); on and remote_apply are kept.
func TestClaimCommitsDurably(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		database        string
		keepRemoteWrite bool
		claim           string
	}{
		{"off", false, "on"}, {"local", false, "on"}, {"on", false, "on"}, {"remote_write", false, "on"},
		{"remote_apply", false, "remote_apply"},
		{"local", true, "on"}, {"remote_write", true, "remote_write"},
	} {
		name := "DatabaseSetTo_" + tc.database
		if tc.keepRemoteWrite {
			name += "_KeepingRemoteWrite"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := dbtest.New(t)
			recorded := dbtest.RecordSynchronousCommit(t, db, "webhook_inbox", "river_job")
			pool := dbtest.SetSynchronousCommit(t, db, db.URL, tc.database)
			client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
			require.NoError(t, err)
			ingester := inboxstore.NewIngester(pool, client, &inboxstore.IngesterConfig{KeepRemoteWrite: tc.keepRemoteWrite})
			require.Equal(t, tc.claim, inboxstore.ClaimLevel(tc.database, tc.keepRemoteWrite))

			_, err = ingester.Ingest(ctx, delivery(event("msg_one")))
			require.NoError(t, err)
			_, err = ingester.IngestGroup(ctx, []*inboxstore.Delivery{delivery(event("msg_g1")), delivery(event("msg_g2"))})
			require.NoError(t, err)
			got := recorded()
			require.Subset(t, got, []string{"webhook_inbox INSERT " + tc.claim, "river_job INSERT " + tc.claim})
			for _, w := range got {
				require.True(t, strings.HasSuffix(w, " "+tc.claim), "a claim's write at %q", w)
			}
		})
	}
}

// TestDurableTxOptions checks the durable BEGIN in each query mode, both
// directly and through PgBouncer in transaction mode: off and local are on
// inside the transaction, remote_apply stays remote_apply, and the setting
// does not outlive the transaction on the (pooled) server connection.
func TestDurableTxOptions(t *testing.T) {
	t.Parallel()
	bouncer := dbtest.StartPgBouncer(t)
	for _, via := range []string{"direct", "pgbouncer"} {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
			for _, tc := range []struct{ database, inside string }{{"off", "on"}, {"local", "on"}, {"remote_apply", "remote_apply"}} {
				t.Run(fmt.Sprintf("%s/%s/%s", via, mode, tc.database), func(t *testing.T) {
					t.Parallel()
					ctx := context.Background()
					db := dbtest.New(t)
					url := db.URL
					if via == "pgbouncer" {
						url = bouncer.URL(t, db)
					}
					dbtest.SetSynchronousCommit(t, db, url, tc.database)
					config, err := pgxpool.ParseConfig(url)
					require.NoError(t, err)
					config.ConnConfig.DefaultQueryExecMode = mode
					config.MaxConns = 1
					pool, err := pgxpool.NewWithConfig(ctx, config)
					require.NoError(t, err)
					defer pool.Close()

					for range 2 {
						var inside string
						require.NoError(t, inboxstore.BeginDurableFunc(ctx, pool, func(tx pgx.Tx) error {
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
