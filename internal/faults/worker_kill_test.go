package faults_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// workerConcurrency is worker.concurrency in setup: the events in flight
// when a worker is killed.
const workerConcurrency = 8

// reaperWindow bounds the time from the last worker's start to every event
// done: River's rescuer takes back a killed worker's running jobs once the
// dead leader's lease (about 15 s) has expired and the jobs are older than
// rescue_after (the last worker's: 3 s); the rest is draining.
const reaperWindow = 90 * time.Second

// TestWorkerSIGKILL is scenario 2: a ledger worker is SIGKILLed in the
// middle of its transactions, again and again, over a backlog of
// deposits; a last worker then drains it. The balances must be the sum of
// the distinct deposits, every event done, and none stuck beyond
// reaperWindow.
//
// Each kill interrupts transactions by construction, as in examples/ledger's
// crash test: the test holds a row lock on acc_0, so every deposit to it
// (and the rest of its group's transaction) blocks inside its handler after
// its inbox row was marked done, uncommitted. The kill comes once every
// worker slot holds such a transaction: a state that cannot change while
// the lock is held.
func TestWorkerSIGKILL(t *testing.T) {
	t.Parallel()
	row := record(t, "2 worker SIGKILL mid-transaction")
	began := time.Now()
	db := ledgerDB(t)
	// A transaction per event, so that each of the workerConcurrency jobs in
	// flight holds its own row when it blocks (in a group, a job waiting for
	// the group's permit holds none): the crash inside a group commit is
	// scenario 8. A worker keeps four of its pool's connections off event
	// transactions (River's and its bookkeeping's), so the pool has those
	// four beside one per job.
	config := setup{DB: db.URL, Worker: "group_max_events: 1", MaxConns: workerConcurrency + 4}.write(t)
	ctx := context.Background()

	n, kills := size(1000, 4000), size(1, 4)
	ds := faults.Deposits("w", n, 7)
	ingest(t, db.Pool, ds)
	row.Offered, row.Acked = n, n
	_, err := db.Pool.Exec(ctx, `INSERT INTO ledger_accounts (account_id) SELECT 'acc_' || g FROM generate_series(0, 6) AS g`)
	require.NoError(t, err)

	interrupted := 0
	for range kills {
		lock, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer lock.Rollback(ctx) // Released below; this is for a failed test.
		_, err = lock.Exec(ctx, `SELECT 1 FROM ledger_accounts WHERE account_id = 'acc_0' FOR UPDATE`)
		require.NoError(t, err)
		w, _ := startWorker(t, config)
		var inFlight []int64
		waiting, logged := time.Now(), false
		w.WaitUntil(t, 90*time.Second, func() bool {
			inFlight = dbtest.BlockedJobs(t, db.Pool, inboxstore.JobKind)
			if !logged && len(inFlight) != workerConcurrency && time.Since(waiting) > 80*time.Second {
				logged = true // the condition is about to fail: say what the slots are doing, lock still held
				logRunningJobs(t, db.Pool)
			}
			return len(inFlight) == workerConcurrency
		})
		w.Kill(t)
		t.Logf("%s: killed with %d events mid-transaction", time.Since(began), len(inFlight))
		require.NoError(t, lock.Rollback(ctx))
		// The killed worker's backends still wait for acc_0's lock: each
		// takes it in turn, finds its client gone and rolls back. The next
		// round's lock must not be taken ahead of one of them (a newcomer can
		// take a released row lock before the waiters wake), or that backend
		// would wait again and count as one of the next worker's slots.
		for deadline := time.Now().Add(time.Minute); len(dbtest.BlockedJobs(t, db.Pool, inboxstore.JobKind)) > 0; {
			require.True(t, time.Now().Before(deadline), "the killed worker's blocked transactions never ended")
			<-time.After(10 * time.Millisecond)
		}
		// What the kill interrupted died with the process: the rows are pending.
		var pending int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE id = ANY($1) AND status = 'pending'`, inFlight).Scan(&pending))
		require.Equal(t, len(inFlight), pending, "rows whose transaction the kill interrupted")
		interrupted += len(inFlight)
	}

	last := setup{DB: db.URL, Job: 2 * time.Second}.write(t)
	restart := time.Now()
	w, _ := startWorker(t, last)
	row.Stall = waitDone(t, w, db.Pool, n, reaperWindow)
	row.Recover = time.Since(restart)
	t.Logf("%s: all done", time.Since(began))
	o := check(t, db.Pool, ds, allAcked(ds))
	row.Lost, row.Twice = o.lost(), o.twice()
	row.Note = fmt.Sprintf("%d kills, %d events mid-transaction", kills, interrupted)
	w.Stop(t)
}

// ingest claims ds in the inbox in one transaction, as the receiver's group
// commit would, so that the scenario starts from a backlog.
func ingest(t *testing.T, pool *pgxpool.Pool, ds []faults.Deposit) {
	t.Helper()
	deliveries := make([]*inboxstore.Delivery, len(ds))
	for i := range ds {
		body := ds[i].Body()
		deliveries[i] = &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: body,
			Events: []inboxstore.IncomingEvent{{ID: ds[i].ID, Type: faults.DepositType, Payload: body}}}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	results, err := inboxstore.NewIngester(pool, client, &inboxstore.IngesterConfig{}).IngestGroup(context.Background(), deliveries)
	require.NoError(t, err)
	claimed := 0
	for _, res := range results {
		claimed += res.New
	}
	require.Equal(t, len(ds), claimed)
}

// allAcked returns an Ack for each of ds: events committed before the
// scenario, acknowledged as far as its check goes.
func allAcked(ds []faults.Deposit) []faults.Ack {
	acks := make([]faults.Ack, len(ds))
	for i := range ds {
		acks[i] = faults.Ack{ID: ds[i].ID}
	}
	return acks
}

// logRunningJobs logs every running job with its inbox row and what the
// backends of the database wait on, so that a kill condition that was never
// met says why.
func logRunningJobs(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT format('job %s %s attempt %s: row %s %s xmax %s', j.id, j.kind, j.attempt, i.id, i.status, i.xmax)
FROM river_job AS j LEFT JOIN webhook_inbox AS i ON i.id = (j.args->>'inbox_id')::bigint
WHERE j.state = 'running' AND i.status = 'pending'
UNION ALL
SELECT format('backend %s xid %s %s %s/%s: %s', a.pid, a.backend_xid, a.state, a.wait_event_type, a.wait_event, left(a.query, 120))
FROM pg_stat_activity AS a WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()`)
	if err != nil {
		t.Logf("running jobs: %v", err)
		return
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Logf("running jobs: %v", err)
		return
	}
	t.Logf("running jobs and backends:\n%s", strings.Join(lines, "\n"))
}
