package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// TestSourceMovedToAnotherQueue is scenario 11: the bank source moves from
// queue qa to queue qb under load, as the deploying guide advises when
// routes change. The worker on qa is stopped mid-load while its receiver
// keeps enqueueing to qa, so events are stranded there by construction: no
// live worker works qa. A worker with the new config (bank on qb) and a
// receiver with it start; the old receiver keeps enqueueing to qa
// meanwhile. The new worker's reaper must move every stranded job to qb
// exactly once (a move, not a new job: every row ends with one job), and
// every event must end done, applied once.
func TestSourceMovedToAnotherQueue(t *testing.T) {
	t.Parallel()
	row := record(t, "11 source moved to another queue")
	db := ledgerDB(t)
	ctx := context.Background()
	oldConfig := setup{DB: db.URL, Queue: "qa"}.write(t)
	newConfig := setup{DB: db.URL, Queue: "qb", Worker: "reaper_interval: 2s"}.write(t)

	n := size(600, 3000)
	ds := faults.Deposits("move", 3*n, 7)
	before, during, after := ds[:n], ds[n:2*n], ds[2*n:]
	oldReceiver, oldTarget := startReceiver(t, oldConfig)
	oldWorker, _ := startWorker(t, oldConfig)
	oldSender := &faults.Sender{Targets: []string{oldTarget}, Secret: secret, Workers: 2, Every: 5 * time.Millisecond}
	runCtx, cancel := context.WithTimeout(ctx, size(3*time.Minute, 6*time.Minute))
	defer cancel()
	reports := make(chan *faults.Report, 3)
	go func() { reports <- oldSender.Run(runCtx, before[:n/2]) }()
	oldWorker.WaitUntil(t, time.Minute, func() bool { return countDone(t, db.Pool) >= n/4 })
	oldWorker.Stop(t) // its record is deleted: no live worker works qa
	acks := (<-reports).Acks
	// Enqueued on qa with no worker there: stranded by construction.
	rep := oldSender.Run(runCtx, before[n/2:])
	acks = append(acks, rep.Acks...)
	require.Len(t, acks, n)
	stranded := pendingOn(t, db.Pool, "qa")
	require.GreaterOrEqual(t, stranded, n-n/2, "events enqueued on qa after its worker stopped")

	// The new config's worker and receiver; the old receiver still enqueues to qa.
	newWorker, _ := startWorker(t, newConfig)
	_, newTarget := startReceiver(t, newConfig)
	newSender := &faults.Sender{Targets: []string{newTarget}, Secret: secret, Workers: 2, Every: 5 * time.Millisecond}
	go func() { reports <- oldSender.Run(runCtx, during) }()
	go func() { reports <- newSender.Run(runCtx, after) }()
	for range 2 {
		rep := <-reports
		require.Len(t, rep.Acks, n, "deliveries acknowledged (failed attempts: %v)", rep.Answers)
		acks = append(acks, rep.Acks...)
	}
	oldReceiver.Stop(t)
	waitDone(t, newWorker, db.Pool, len(ds), time.Minute)
	o := check(t, db.Pool, ds, acks) // one job per row: moved, never enqueued again

	_, moved := reaperCounts(newWorker)
	var onQB, leftOnQA int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE j.queue = 'qb' AND i.event_id < $2),
       count(*) FILTER (WHERE j.queue = 'qa' AND j.state <> 'completed')
FROM webhook_inbox AS i JOIN river_job AS j ON j.kind = $1 AND (j.args->>'inbox_id')::bigint = i.id`,
		inboxstore.JobKind, during[len(during)-1].ID+"~").Scan(&onQB, &leftOnQA))
	// Each event the old receiver enqueued on qa and the new worker worked
	// was moved once: the reaper's count of moves is exactly those jobs.
	require.Equal(t, onQB, moved, "jobs moved from qa to qb")
	require.Zero(t, leftOnQA, "jobs left on qa")
	newWorker.Stop(t)
	row.Offered, row.Acked, row.Lost, row.Twice = len(ds), len(acks), o.lost(), o.twice()
	row.Note = fmt.Sprintf("%d stranded on qa when the new worker started, %d jobs moved qa -> qb once each, 0 stranded at the end, %d done",
		stranded, moved, o.done)
}

// pendingOn counts the pending rows whose job waits on queue.
func pendingOn(t *testing.T, pool *pgxpool.Pool, queue string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `
SELECT count(*) FROM webhook_inbox AS i JOIN river_job AS j ON j.kind = $1 AND (j.args->>'inbox_id')::bigint = i.id
WHERE i.status = 'pending' AND j.queue = $2`, inboxstore.JobKind, queue).Scan(&n))
	return n
}
