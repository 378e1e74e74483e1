package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// TestPostgresRestart is scenario 3: the database server of a receiver and
// a ledger worker is stopped under load (pg_ctl stop -m fast, then -m
// immediate) and started again; a restart split in two, so that the test
// knows when the server is down. While it is down the receiver must answer
// 503, never 2xx: a delivery attempted after the stop returned and answered
// before the start began cannot have been committed. Both daemons must
// recover without a restart of their own, and nothing acknowledged may be
// lost or applied twice. The cluster is the scenario's own.
//
// An immediate stop a moment after the worker's asynchronous COMMIT loses
// the effect and the done mark together, while River's completer, retrying
// across the restart, may complete the job: the row is pending beside a
// completed job, and the reaper enqueues it again (a lost commit). That
// second job is counted, not taken for a second application (the ledger
// entries and the balances measure those). The 2 minute bound holds by
// construction: the completer retries for at most about 37 s, the reaper
// acts 5 s (worker.LostCommitGraceDefault) after the completion at its
// next pass (reaper_interval: 1m); a completion given up is a running job
// that River's rescuer takes back once rescue_after (4 s) has passed.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	row := record(t, "3 PostgreSQL restart (fast, immediate)")
	began := time.Now()
	c := newCluster(t, "max_connections = 40")
	dbURL := c.createDB(t, "faults")
	config := setup{DB: dbURL, Job: 3 * time.Second}.write(t)
	migrate(t, dbURL)
	t.Logf("%s: cluster up", time.Since(began))
	receiver, target := startReceiver(t, config)
	worker, _ := startWorker(t, config)

	n := size(800, 4000)
	ds := faults.Deposits("pg", n, 7)
	sender := &faults.Sender{Targets: []string{target}, Secret: secret, Workers: 2, Every: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 6*time.Minute))
	defer cancel()
	reports := make(chan *faults.Report, 1)
	go func() { reports <- sender.Run(ctx, ds) }()

	type window struct{ down, up time.Time }
	var windows []window
	var probes []faults.Deposit
	for i, mode := range []string{"fast", "immediate"} {
		receiver.WaitUntil(t, time.Minute, func() bool { return sender.Acked() >= int64((2*i+1)*n/5) })
		t.Logf("%s: stop -m %s", time.Since(began), mode)
		c.stop(t, mode)
		down := time.Now()
		// A delivery while the server is down: refused with 503, to be retried.
		probe := faults.Deposit{ID: "probe_" + mode, Account: "acc_0", Cents: 1}
		probes = append(probes, probe)
		require.Equal(t, http.StatusServiceUnavailable, post(t, target, &probe), "a delivery while PostgreSQL is down (%s)", mode)
		up := time.Now()
		c.start(t)
		windows = append(windows, window{down, up})
		receiver.WaitUntil(t, time.Minute, func() bool { return sender.Acked() >= int64((2*i+2)*n/5) })
	}
	rep := <-reports
	t.Logf("%s: all acked", time.Since(began))
	require.Len(t, rep.Acks, n, "deliveries acknowledged before the deadline (failed attempts: %v)", rep.Answers)
	for _, w := range windows {
		first := time.Time{}
		for _, a := range rep.Acks {
			require.False(t, a.Sent.After(w.down) && a.Answered.Before(w.up), "%s answered 2xx while PostgreSQL was down", a.ID)
			if a.Answered.After(w.up) && (first.IsZero() || a.Answered.Before(first)) {
				first = a.Answered
			}
		}
		row.Recover = max(row.Recover, first.Sub(w.up))
	}
	// The probes, refused while the server was down, are retried now.
	probeRep := (&faults.Sender{Targets: []string{target}, Secret: secret}).Run(ctx, probes)
	require.Len(t, probeRep.Acks, len(probes))

	all := append(append([]faults.Deposit(nil), ds...), probes...)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	waitDone(t, worker, pool, len(all), 2*time.Minute)
	t.Logf("%s: all done", time.Since(began))
	o := checkEffects(t, pool, all, append(rep.Acks, probeRep.Acks...))
	requeued, _ := reaperCounts(worker)
	receiver.RequireRunning(t)
	worker.RequireRunning(t)
	row.Offered, row.Acked, row.Stall = len(all), len(rep.Acks)+len(probeRep.Acks), rep.LongestGap
	row.Lost, row.Twice = o.lost(), o.twice()
	row.Note = fmt.Sprintf("2 restarts, same daemons throughout; lost commits healed: %d rows requeued (%d with 2 jobs); failed attempts retried: %v",
		requeued, o.jobsTwice, rep.Answers)
}

// reaperLine matches the reaper's log line of a pass that healed rows.
var reaperLine = regexp.MustCompile(`"reaper healed orphaned rows".*"requeued":(\d+).*"moved":(\d+)`)

// reaperCounts sums the rows the worker p's reaper enqueued again and the
// jobs it moved to their source's queue, from its log.
func reaperCounts(p *proctest.Process) (requeued, moved int) {
	for _, m := range reaperLine.FindAllStringSubmatch(p.Log(), -1) {
		r, _ := strconv.Atoi(m[1])
		v, _ := strconv.Atoi(m[2])
		requeued, moved = requeued+r, moved+v
	}
	return requeued, moved
}

// post sends d once to url and returns the answer's status.
func post(t *testing.T, url string, d *faults.Deposit) int {
	t.Helper()
	req, err := faults.Sign(context.Background(), url, secret, d, time.Now())
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
