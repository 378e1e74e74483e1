package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// asyncCommitConf opens wide the window that synchronous_commit = off
// leaves: the WAL writer writes only full WAL pages between its rounds,
// which come at its longest delay, and flushes nothing in between; no
// autovacuum worker (whose commits flush the WAL: it runs at local) and no
// checkpoint or background write flush it either. The WAL of the last
// async commits then sits in PostgreSQL's shared memory when the server
// stops, and an immediate stop loses them. A commit that waits for the
// flush is on disk whatever these settings are.
const asyncCommitConf = `autovacuum = off
wal_writer_delay = '10s'
wal_writer_flush_after = '1GB'
checkpoint_timeout = '1h'
bgwriter_lru_maxpages = 0`

// TestCrashWithAsyncCommitDatabase is scenario 9 (issue 24): the
// receiver's database is set to synchronous_commit = off (ALTER DATABASE
// … SET, as managed-PostgreSQL users do for speed), N deliveries are
// answered 2xx, and the server is stopped with pg_ctl stop -m immediate
// (a crash: what is not in the WAL on disk is gone) as soon as the last
// answer arrives, then started again. Every acknowledged event must be in
// the inbox with its job: the claim's COMMIT must have waited for the WAL
// flush before the receiver answered. The cluster is the scenario's own.
func TestCrashWithAsyncCommitDatabase(t *testing.T) {
	t.Parallel()
	row := record(t, "9 PostgreSQL crash, database at synchronous_commit = off")
	ctx := context.Background()
	c := newCluster(t, asyncCommitConf)
	dbURL := c.createDB(t, "faults")
	migrate(t, dbURL)
	setAsyncCommit(t, dbURL)
	receiver, target := startReceiver(t, setup{DB: dbURL}.write(t))

	n := size(50, 500)
	ds := faults.Deposits("async", n, 7)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep := (&faults.Sender{Targets: []string{target}, Secret: secret, Workers: 4}).Run(sctx, ds)
	// The crash comes right after the last 2xx, before anything else.
	c.stop(t, "immediate")
	require.Len(t, rep.Acks, n, "deliveries acknowledged before the crash (failed attempts: %v)", rep.Answers)
	c.start(t)

	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	rows, jobs := storedWithJob(t, pool)
	var lostRows, lostJobs []string
	for _, a := range rep.Acks {
		if !rows[a.ID] {
			lostRows = append(lostRows, a.ID)
		}
		if !jobs[a.ID] {
			lostJobs = append(lostJobs, a.ID)
		}
	}
	row.Offered, row.Acked, row.Lost = n, len(rep.Acks), len(lostRows)
	row.Note = fmt.Sprintf("pg_ctl stop -m immediate right after the last 2xx; acknowledged events without their job after the restart: %d", len(lostJobs))
	require.Empty(t, lostRows, "acknowledged events missing from the inbox after the crash")
	require.Empty(t, lostJobs, "acknowledged events missing their job after the crash")
	receiver.RequireRunning(t)
}

// setAsyncCommit sets the database at dbURL to synchronous_commit = off
// and checks that a new session starts with it.
func setAsyncCommit(t *testing.T, dbURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = off', current_database()); END $$`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	conn, err = pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var setting string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&setting))
	require.Equal(t, "off", setting)
}

// storedWithJob returns the bank source's event ids in the inbox, and
// those of them that have their event job.
func storedWithJob(t *testing.T, pool *pgxpool.Pool) (rows, jobs map[string]bool) {
	t.Helper()
	type stored struct {
		EventID string
		HasJob  bool
	}
	r, err := pool.Query(context.Background(), `SELECT i.event_id, EXISTS (SELECT 1 FROM river_job j
  WHERE j.kind = $1 AND (j.args->>'inbox_id')::bigint = i.id)
FROM webhook_inbox i WHERE i.source = 'bank'`, inboxstore.JobKind)
	require.NoError(t, err)
	all, err := pgx.CollectRows(r, pgx.RowToStructByPos[stored])
	require.NoError(t, err)
	rows, jobs = map[string]bool{}, map[string]bool{}
	for _, s := range all {
		rows[s.EventID] = true
		jobs[s.EventID] = s.HasJob
	}
	return rows, jobs
}
