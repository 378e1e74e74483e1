package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// TestClaimCommitsDurably checks the setting under which the relay's claim
// commits: a trigger on hookinbox_outbox records synchronous_commit as the
// claim's UPDATE sees it. A database set to off is raised to on; one set to
// remote_apply keeps it (the claim must never weaken a stronger setting).
func TestClaimCommitsDurably(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ database, claim string }{{"off", "on"}, {"local", "local"}, {"remote_apply", "remote_apply"}} {
		t.Run("DatabaseSetTo_"+tc.database, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := dbtest.New(t)
			_, err := db.Pool.Exec(ctx, `
CREATE TABLE claim_setting (synchronous_commit text);
CREATE FUNCTION record_claim_setting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO claim_setting VALUES (current_setting('synchronous_commit'));
    RETURN NEW;
END $$;
CREATE TRIGGER record_claim_setting AFTER UPDATE ON hookinbox_outbox
    FOR EACH ROW EXECUTE FUNCTION record_claim_setting()`)
			require.NoError(t, err)
			tx, err := db.Pool.Begin(ctx)
			require.NoError(t, err)
			ev := &inbox.Event{Source: "stripe", EventID: "evt_1", EventType: "invoice.paid"}
			_, err = outbox.Enqueue(ctx, tx, ev, outbox.Message{Destination: "billing", Payload: []byte(`{}`)})
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))

			_, err = db.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET synchronous_commit = %s`, db.Name, tc.database))
			require.NoError(t, err)
			pool, err := pgxpool.New(ctx, db.URL)
			require.NoError(t, err)
			defer pool.Close()
			var session string
			require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&session))
			require.Equal(t, tc.database, session, "the database's setting in a new session")

			recs, err := outbox.NewStore(pool).Claim(ctx, "billing", 10, time.Minute)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			var got []string
			rows, err := db.Pool.Query(ctx, `SELECT synchronous_commit FROM claim_setting`)
			require.NoError(t, err)
			for rows.Next() {
				var s string
				require.NoError(t, rows.Scan(&s))
				got = append(got, s)
			}
			require.NoError(t, rows.Err())
			require.Equal(t, []string{tc.claim}, got)
		})
	}
}
