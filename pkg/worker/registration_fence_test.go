package worker

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// testRegistration is a registration on queues (default when none), with
// routes named after id, renewed every interval.
func testRegistration(db *dbtest.DB, id string, interval time.Duration, queues ...string) *registration {
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	routes := make([]string, len(queues))
	for i := range queues {
		routes[i] = "bank * -> " + id
	}
	return &registration{
		pool: db.Pool, id: id, host: "test", pid: 1, queues: queues, routes: routes,
		interval: interval, base: time.Now(),
	}
}

// expireRecords sets worker id's records expired a second ago, as if it
// had not renewed them for their TTL.
func expireRecords(t *testing.T, db *dbtest.DB, id string) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(),
		`UPDATE hookinbox_worker_routes SET expires_at = now() - interval '1 second' WHERE worker_id = $1`, id)
	require.NoError(t, err)
}

func TestOnlyWorkingRecordsUnfence(t *testing.T) {
	t.Parallel()

	// A worker fenced itself (nothing extended its records for fenceAfter)
	// and its records expired; a worker with other routes took the queue.
	// What brings the first back to the database must leave it fenced:
	// the claim that finds the other working records it waiting, the
	// renewals of those waiting records extend nothing it may work on,
	// and a renewal never revives a record that expired. (TestAWorkerThat
	// CannotRenewFencesItself drives the whole path; its drain may end
	// before a renewal, which this test does not leave to timing.)
	ctx := context.Background()
	db := dbtest.New(t)
	r := testRegistration(db, "a", time.Second)
	blocker, err := r.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	require.False(t, r.fenced())
	// Its last extension an hour ago, on the clock fenced reads.
	r.base = r.base.Add(-time.Hour)
	require.True(t, r.fenced())

	// A renewal of a record that expired, not yet deleted, revives nothing.
	expireRecords(t, db, "a")
	ok, _, err := r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok, "an expired record was renewed")
	require.True(t, r.fenced())

	// Another route set's worker claims the queue: it deletes the expired
	// record and works.
	b := testRegistration(db, "b", time.Hour)
	blocker, err = b.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)

	ok, _, err = r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok, "the record is gone")
	blocker, err = r.claim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker)
	require.Equal(t, "bank * -> b", blocker.TheirRoutes)
	require.True(t, r.fenced(), "the claim that found b working unfenced the worker")
	ok, working, err := r.renew(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the waiting record lives")
	require.False(t, working)
	require.True(t, r.fenced(), "the renewal of a waiting record unfenced the worker")
}

func TestAnOlderSetNeverWorksAQueueAfterANewerOne(t *testing.T) {
	t.Parallel()

	// A newer route set took the queue over from an older one; then both
	// sets' records expired in one outage, and the older set's worker came
	// back first. It must not work the queue again (the soak's seed 303 saw
	// the rollout go backwards so, and the newer set retire): the newer
	// set's expired record still blocks it, and its reclaim leaves no
	// record. The newer set's reclaim then works the queue, and a claim
	// newer still deletes the old mark.
	ctx := context.Background()
	db := dbtest.New(t)
	reg := func(id string) *registration { return testRegistration(db, id, time.Second) }
	records := func() map[string]string {
		rows, err := db.Pool.Query(ctx, `SELECT worker_id, state FROM hookinbox_worker_routes`)
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var id, state string
			require.NoError(t, rows.Scan(&id, &state))
			out[id] = state
		}
		require.NoError(t, rows.Err())
		return out
	}
	older, newer := reg("older"), reg("newer")
	blocker, err := older.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	blocker, err = newer.claim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker, "newer waits for older")
	expireRecords(t, db, "older")
	blocker, err = newer.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker, "newer takes the queue over")

	// The outage: both expire; older comes back first.
	expireRecords(t, db, "newer")
	blocker, err = older.reclaim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker, "older worked the queue again after newer had")
	require.Equal(t, "bank * -> newer", blocker.TheirRoutes)
	require.Equal(t, map[string]string{"newer": recordWorking}, records(), "older left a record, or deleted newer's mark")

	live, working, err := newer.renew(ctx)
	require.NoError(t, err)
	require.False(t, live)
	require.False(t, working)
	blocker, err = newer.reclaim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker, "newer works again")
	require.False(t, newer.fenced())

	// A route set newer still deletes the mark once it expired.
	expireRecords(t, db, "newer")
	blocker, err = reg("newest").claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	require.Equal(t, map[string]string{"newest": recordWorking}, records())
}

func TestAReclaimThatFindsAnotherRouteSetLeavesNoRecord(t *testing.T) {
	t.Parallel()

	// A working worker's record expired (not deleted yet), and a newer
	// route set waits on its queue. Its renewal revives nothing; its
	// reclaim finds the newer set, deletes its record and stays fenced;
	// the newer set then takes the queue at its next claim. A waiting
	// record left by the reclaim, renewed while the worker drains, would
	// tell an older set working the queue that a newer one waits for it.
	ctx := context.Background()
	db := dbtest.New(t)
	r := testRegistration(db, "a", time.Second)
	blocker, err := r.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	c := testRegistration(db, "c", time.Hour)
	blocker, err = c.claim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker, "c waits for a")
	r.base = r.base.Add(-time.Hour)
	expireRecords(t, db, "a")

	ok, _, err := r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	blocker, err = r.reclaim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker)
	require.Equal(t, recordWaiting, blocker.State)
	require.True(t, r.fenced())
	var left int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_worker_routes WHERE worker_id = 'a'`).Scan(&left))
	require.Zero(t, left, "the reclaim left a record")
	ok, _, err = r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.True(t, r.fenced())

	blocker, err = c.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker, "c takes the queue")
}

// TestTheRoutesRecordsCommitDurably: a claim and a renewal commit at
// synchronous_commit = on in a session at off (as the soak's database
// sets it): the worker acts on what they record (it works its queue, it
// stays unfenced), so a PostgreSQL crash must not lose them. Their
// triggers see the level each statement's transaction commits at.
func TestTheRoutesRecordsCommitDurably(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var session string
	require.NoError(t, pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&session))
	require.Equal(t, "off", session)
	_, err = db.Pool.Exec(ctx, `
CREATE TABLE commit_levels (op text NOT NULL, level text NOT NULL);
CREATE FUNCTION commit_level() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_levels VALUES (TG_OP, current_setting('synchronous_commit'));
    RETURN NEW;
END $$;
CREATE TRIGGER commit_level AFTER INSERT OR UPDATE ON hookinbox_worker_routes
    FOR EACH ROW EXECUTE FUNCTION commit_level();`)
	require.NoError(t, err)

	r := testRegistration(db, "a", time.Second)
	r.pool = pool
	blocker, err := r.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	live, working, err := r.renew(ctx)
	require.NoError(t, err)
	require.True(t, live && working)

	rows, err := db.Pool.Query(ctx, `SELECT op || ' at ' || level FROM commit_levels ORDER BY op`)
	require.NoError(t, err)
	levels, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"INSERT at on", "UPDATE at on"}, levels)
}
