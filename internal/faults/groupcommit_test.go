package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
)

// TestGroupCommitCrash is scenario 8: the connection of a group commit
// dies, once before the commit and once right after a COMMIT the server
// carried out. Every delivery of the group must be answered 503; the
// provider's retries must then store each event once and have it processed
// once, also when the commit had landed.
//
// Each step holds by construction. The receiver has one flusher. The test
// holds webhook_inbox in EXCLUSIVE mode, so that a delivery's insert waits
// on it: the first delivery (A) occupies the flusher, and the group (B)
// sent next waits in the queue (the receiver's queue gauge says when all of
// it is there). The test then terminates A's backend (pg_terminate_backend:
// A's transaction dies mid-way), and the flusher takes all of B as one
// group, whose insert waits on the lock in turn: one waiter, an empty
// queue. The test arms the proxy between the receiver and PostgreSQL for
// that waiting backend's pid and releases the lock: the group's COMMIT reaches the server, which answers
// COMMIT, and the proxy closes the connection instead of passing that on.
func TestGroupCommitCrash(t *testing.T) {
	t.Parallel()
	row := record(t, "8 crash inside the group commit")
	db := ledgerDB(t)
	ctx := context.Background()
	cutter, proxied := newCommitCutter(t, db.URL)
	receiver, target := startReceiver(t, setup{DB: proxied, Flushers: 1, Receiver: "ack_timeout: 60s"}.write(t))
	metricsURL := target[:len(target)-len("/webhooks/bank")] + "/metrics"

	lock, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(ctx) // Committed below; this is for a failed test.
	_, err = lock.Exec(ctx, `LOCK TABLE webhook_inbox IN EXCLUSIVE MODE`)
	require.NoError(t, err)

	group := size(5, 20)
	a := faults.Deposits("gc_a", 1, 7)
	b := faults.Deposits("gc_b", group, 7)
	answers := make(chan int, 1+group)
	send := func(d faults.Deposit) {
		req, err := faults.Sign(ctx, target, secret, &d, time.Now())
		if err != nil {
			answers <- 0
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answers <- 0
			return
		}
		resp.Body.Close()
		answers <- resp.StatusCode
	}
	go send(a[0])
	db.WaitForLockWaiters(t, 1)
	for _, d := range b {
		go send(d)
	}
	receiver.WaitUntil(t, time.Minute, func() bool { return queued(t, metricsURL) == group })
	var pid int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&pid))
	var terminated bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&terminated))
	require.True(t, terminated)
	require.Equal(t, http.StatusServiceUnavailable, <-answers, "the delivery whose connection was terminated")
	// The whole group is now in one transaction, waiting on the lock: the
	// waiter must be its backend, not A's, which pg_stat_activity may list
	// for a moment after A's answer, while it exits.
	var groupPID int32
	receiver.WaitUntil(t, time.Minute, func() bool {
		var waiters, gone int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pid <> $1 AND wait_event_type = 'Lock'),
       count(*) FILTER (WHERE pid = $1),
       coalesce(max(pid) FILTER (WHERE pid <> $1 AND wait_event_type = 'Lock'), 0)
FROM pg_stat_activity WHERE datname = current_database()`, pid).Scan(&waiters, &gone, &groupPID))
		return queued(t, metricsURL) == 0 && waiters == 1 && gone == 0
	})
	// The cut is the group's own COMMIT: the proxy knows each connection's
	// backend pid.
	cutter.arm(groupPID)
	require.NoError(t, lock.Commit(ctx))
	select {
	case tag := <-cutter.tags:
		require.Equal(t, "COMMIT", tag, "the server's answer to the group's COMMIT")
	case <-time.After(time.Minute):
		t.Fatal("the group never committed")
	}
	for range group {
		require.Equal(t, http.StatusServiceUnavailable, <-answers, "a delivery of the group whose commit's answer was lost")
	}
	receiver.WaitLine(t, "group commit failed", fmt.Sprintf(`"deliveries":%d`, group))
	var landed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE event_id LIKE 'gc_b_%'`).Scan(&landed))
	require.Equal(t, group, landed, "the group's commit landed")

	// The provider retries every refused delivery.
	all := append(append([]faults.Deposit(nil), a...), b...)
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep := (&faults.Sender{Targets: []string{target}, Secret: secret}).Run(rctx, all)
	require.Len(t, rep.Acks, len(all))
	worker, _ := startWorker(t, setup{DB: db.URL}.write(t))
	row.Stall = waitDone(t, worker, db.Pool, len(all), time.Minute)
	o := check(t, db.Pool, all, rep.Acks)
	row.Offered, row.Acked, row.Lost, row.Twice = len(all), len(rep.Acks), o.lost(), o.twice()
	row.Note = fmt.Sprintf("a backend terminated mid-transaction, then a group of %d whose COMMIT landed unanswered: all 503, stored and applied once after retries", group)
	receiver.RequireRunning(t)
}

// queued returns the receiver's batch_queue_deliveries gauge.
func queued(t *testing.T, metricsURL string) int {
	t.Helper()
	_, page := getPage(t, metricsURL)
	m := regexp.MustCompile(`(?m)^hookinbox_receiver_batch_queue_deliveries (\d+)`).FindStringSubmatch(page)
	require.NotNil(t, m, "no queue gauge in %s", metricsURL)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}
