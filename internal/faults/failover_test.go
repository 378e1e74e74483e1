package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// failover is one row of scenario 13: how the standby replicates, and how
// the primary fails.
type failover struct {
	name string
	// async makes the standby asynchronous; otherwise it is synchronous
	// (synchronous_standby_names = '*').
	async bool
	// local sets the database to synchronous_commit = local, which does not
	// wait for a synchronous standby.
	local bool
	// behind, when set, hangs the replication link that many
	// acknowledgements before the fault, or as soon as every claim waits for
	// the standby (a synchronous commit does).
	behind int
	// hang makes the primary hang behind a proxy (packets dropped, nothing
	// refused) instead of dying; it is then killed unseen, as fencing would.
	hang bool
	// noTimeout leaves connect_timeout out of the DSN: each attempt at a
	// host then has the daemons' default, 10 s.
	noTimeout bool
}

// TestFailover is scenario 13 (issue 39): a primary and a streaming standby,
// two clusters of the scenario's own (pg_basebackup -R), and the real
// receiver and worker on a multi-host DSN (target_session_attrs=read-write,
// connect_timeout=2) under the product's defaults. Under load from 16
// senders the primary's postmaster is SIGKILLed, and once a provider has
// seen the outage (a failed attempt after the fault) the standby is
// promoted with pg_ctl promote. Both daemons must heal without a restart,
// and every event stored must end done, applied once. With a synchronous
// standby no acknowledged event may be lost.
//
// The rows:
//   - the plain case;
//   - what makes a standby lose acknowledged commits is WAL the primary
//     wrote that never reached it. The replication link runs through a
//     proxy, which the "link stalled" rows hang, holding what it read, 500
//     acknowledgements before the kill (or as soon as a commit waits for
//     the standby, which with a synchronous standby is at once), and cut at
//     the kill, dropping what it held. An asynchronous standby then loses
//     what was acknowledged meanwhile, which the row measures and requires
//     (it shows what the setting costs); a database at synchronous_commit =
//     local lost it too before the claim raised local to on (511 lost);
//   - a primary that hangs rather than dies: the daemons reach it through a
//     proxy that hangs (nothing forwarded, no connection refused or
//     closed), and it is killed unseen behind it, as fencing would; once
//     with connect_timeout=2 in the DSN, once without (the daemons' 10 s
//     default per host).
//
// The row's stall is the 503 window (from the fault to the first 2xx of an
// attempt sent after it), its recover the time from the promotion to that
// 2xx; the note says when the last event was done, counted from the
// promotion (issue 43 measures its heal time here).
func TestFailover(t *testing.T) {
	t.Parallel()
	if !full {
		t.Skip("make faults only: a row takes 2 to 3.5 minutes, most of it waiting for River's rescuer (issue 43); TestDoctor runs a promotion in make test")
	}
	rows := []failover{
		{name: "synchronous standby, primary killed"},
		{name: "synchronous standby, database at synchronous_commit = local, link stalled", local: true, behind: 500},
		{name: "asynchronous standby, link stalled", async: true, behind: 500},
		{name: "synchronous standby, primary hangs", hang: true},
		{name: "synchronous standby, primary hangs, no connect_timeout in the DSN", hang: true, noTimeout: true},
	}
	for _, f := range rows {
		t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			runFailover(t, &f)
		})
	}
}

func runFailover(t *testing.T, f *failover) {
	row := record(t, "13 failover: "+f.name)
	ctx := context.Background()
	began := time.Now()
	primary, standby, link := newReplicated(t, !f.async, func(dbURL string) {
		migrate(t, dbURL)
		if f.local {
			runSQL(t, dbURL, `ALTER DATABASE faults SET synchronous_commit = local`)
		}
	})
	t.Logf("%s: replicating", time.Since(began))
	front := primary.port
	var door *hangProxy
	if f.hang {
		door = newHangProxy(t, "127.0.0.1:"+primary.port)
		front = strings.TrimPrefix(door.addr(), "127.0.0.1:")
	}
	dsn := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%s,%s user=postgres dbname=faults sslmode=disable target_session_attrs=read-write",
		front, standby.port)
	if !f.noTimeout {
		dsn += " connect_timeout=2"
	}
	config := setup{DB: dsn, Job: -1}.write(t)
	receiver, target := startReceiver(t, config)
	worker, _ := startWorker(t, config)
	t.Logf("%s: clusters and daemons up", time.Since(began))

	n := 12000
	ds := faults.Deposits("fo", n, 7)
	sender := &faults.Sender{Targets: []string{target}, Secret: secret, Workers: 16}
	sctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	reports := make(chan *faults.Report, 1)
	go func() { reports <- sender.Run(sctx, ds) }()
	receiver.WaitUntil(t, 2*time.Minute, func() bool { return sender.Acked() >= int64(n/3) })

	var note string
	if f.behind > 0 {
		link.hang()
		at := sender.Acked()
		waiting := primaryWaits(t, primary.URL)
		receiver.WaitUntil(t, time.Minute, func() bool { return sender.Acked() >= at+int64(f.behind) || waiting() })
		note = fmt.Sprintf("%d acknowledged while the link hung; ", sender.Acked()-at)
	}
	fault := time.Now()
	if f.hang {
		door.hang()
	}
	primary.kill(t)
	link.cut()
	failed := sender.Failed()
	receiver.WaitUntil(t, time.Minute, func() bool { return sender.Failed() > failed })
	seen := time.Now()
	standby.promote(t)
	promoted := time.Now()
	t.Logf("%s: killed, promoted %s later", time.Since(began), promoted.Sub(fault))

	rep := <-reports
	require.Len(t, rep.Acks, n, "deliveries acknowledged before the deadline (failed attempts: %v)", rep.Answers)
	first := time.Time{}
	for _, a := range rep.Acks {
		if a.Sent.After(fault) && (first.IsZero() || a.Answered.Before(first)) {
			first = a.Answered
		}
	}
	pool, err := pgxpool.New(ctx, standby.dbURL(t, "faults"))
	require.NoError(t, err)
	defer pool.Close()
	lost := lostAcks(t, pool, rep.Acks)
	row.Offered, row.Acked, row.Lost = n, len(rep.Acks), len(lost)
	row.Stall, row.Recover = first.Sub(fault), first.Sub(promoted)
	if f.async {
		require.Positive(t, row.Lost, "an asynchronous standby behind the primary lost nothing acknowledged: the row measures nothing")
	} else {
		require.Zero(t, row.Lost, "acknowledged events lost in the failover")
	}
	done := waitAllDone(t, worker, pool, n-len(lost), 10*time.Minute)
	t.Logf("%s: all done", time.Since(began))
	o := checkEffects(t, pool, slices.DeleteFunc(ds, func(d faults.Deposit) bool { return lost[d.ID] }),
		slices.DeleteFunc(rep.Acks, func(a faults.Ack) bool { return lost[a.ID] }))
	receiver.RequireRunning(t)
	worker.RequireRunning(t)
	row.Twice = o.twice()
	row.Note = note + fmt.Sprintf("promoted %.1fs after the fault (a provider saw it after %.1fs); last event done %.1fs after the promotion; "+
		"same daemons throughout; failed attempts retried: %v", promoted.Sub(fault).Seconds(), seen.Sub(fault).Seconds(),
		done.Sub(promoted).Seconds(), rep.Answers)
}

// newReplicated starts a primary cluster with a database faults, prepared
// by prepare (given its URL), and a streaming standby of it, synchronous or
// not, whose replication link goes through a proxy of its own. Promoted,
// the standby waits for no standby of its own.
func newReplicated(t *testing.T, synchronous bool, prepare func(dbURL string)) (primary, standby *cluster, link *hangProxy) {
	t.Helper()
	primary = newCluster(t, "")
	prepare(primary.createDB(t, "faults"))
	link = newHangProxy(t, "127.0.0.1:"+primary.port)
	standby = newStandby(t, link.addr(), "synchronous_standby_names = ''")
	state := "async"
	if synchronous {
		runSQL(t, primary.URL, `ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`)
		state = "sync"
	}
	waitReplication(t, primary.URL, state)
	return primary, standby, link
}

// runSQL runs statements on the database at url, each on its own.
func runSQL(t *testing.T, url string, statements ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, s := range statements {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
}

// waitReplication waits until the primary at url streams to a standby whose
// sync_state is state (sync or async).
func waitReplication(t *testing.T, url, state string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1`, state).Scan(&n)
		return err == nil && n > 0
	}, time.Minute, 50*time.Millisecond, "no %s standby streaming after a minute", state)
}

// primaryWaits returns a check, on the primary at url, that a commit waits
// for the synchronous standby: with the link hung, it waits for good.
func primaryWaits(t *testing.T, url string) func() bool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n)
		return err == nil && n > 0
	}
}

// lostAcks returns the acknowledged event ids the database does not hold.
func lostAcks(t *testing.T, pool *pgxpool.Pool, acks []faults.Ack) map[string]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT event_id FROM webhook_inbox WHERE source = 'bank'`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	stored := make(map[string]bool, len(ids))
	for _, id := range ids {
		stored[id] = true
	}
	lost := map[string]bool{}
	for _, a := range acks {
		if !stored[a.ID] {
			lost[a.ID] = true
		}
	}
	return lost
}

// waitAllDone waits until want events are done, reading every 100 ms,
// failing when p exits or after timeout; it returns when it saw them done.
func waitAllDone(t *testing.T, p *proctest.Process, pool *pgxpool.Pool, want int, timeout time.Duration) time.Time {
	t.Helper()
	var at, read time.Time
	p.WaitUntil(t, timeout, func() bool {
		if time.Since(read) < 100*time.Millisecond {
			return false
		}
		read = time.Now()
		if countDone(t, pool) < want {
			return false
		}
		at = read
		return true
	})
	return at
}
