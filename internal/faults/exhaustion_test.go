package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
)

// TestConnectionExhaustion is scenario 4: another client holds all but
// three of PostgreSQL's connections while a receiver and a ledger worker
// start and take load. The daemons must degrade (503, slower draining),
// never crash or answer anything but 2xx or 503, make progress with what is
// left, and recover once the connections are given back. The cluster is
// the scenario's own.
//
// "All but three" holds by construction: the hog opens connections until
// the server refuses one with too_many_connections (53300), then closes
// three. The receiver starts first and answers one delivery, so that its
// pool holds one of the three (pgxpool keeps an idle connection for 30
// minutes); the worker starts next and competes for the other two. The
// hog holds its connections until half the load is acknowledged, a count,
// not a time.
func TestConnectionExhaustion(t *testing.T) {
	t.Parallel()
	row := record(t, "4 connection exhaustion")
	c := newCluster(t, "max_connections = 30")
	dbURL := c.createDB(t, "faults")
	migrate(t, dbURL)
	hog := exhaust(t, dbURL)
	for _, conn := range hog[len(hog)-3:] {
		require.NoError(t, conn.Close(context.Background()))
	}
	hog = hog[:len(hog)-3]
	held := time.Now()

	config := setup{DB: dbURL, Job: 3 * time.Second}.write(t)
	receiver, target := startReceiver(t, config)
	n := size(600, 3000)
	ds := faults.Deposits("ex", n, 7)
	warm := ds[:1]
	ctx, cancel := context.WithTimeout(context.Background(), size(3*time.Minute, 8*time.Minute))
	defer cancel()
	warmRep := (&faults.Sender{Targets: []string{target}, Secret: secret}).Run(ctx, warm)
	require.Len(t, warmRep.Acks, 1)
	worker, _ := startWorker(t, config)
	worker.WaitLine(t, "worker started")

	sender := &faults.Sender{Targets: []string{target}, Secret: secret, Workers: 4, Every: 10 * time.Millisecond}
	reports := make(chan *faults.Report, 1)
	go func() { reports <- sender.Run(ctx, ds[1:]) }()
	receiver.WaitUntil(t, 2*time.Minute, func() bool { return sender.Acked() >= int64(n/2) })
	for _, conn := range hog {
		require.NoError(t, conn.Close(context.Background()))
	}
	released := time.Now()
	t.Logf("held %d connections for %s", len(hog), released.Sub(held).Round(time.Millisecond))
	rep := <-reports
	rep.Acks = append(rep.Acks, warmRep.Acks...)
	require.Len(t, rep.Acks, n, "deliveries acknowledged before the deadline (failed attempts: %v)", rep.Answers)
	for answer := range rep.Answers {
		require.Equal(t, "503", answer, "an attempt answered otherwise than 2xx or 503: %v", rep.Answers)
	}
	first := time.Time{}
	for _, a := range rep.Acks {
		if a.Sent.After(released) && (first.IsZero() || a.Answered.Before(first)) {
			first = a.Answered
		}
	}
	if !first.IsZero() {
		row.Recover = first.Sub(released)
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	waitDone(t, worker, pool, n, 2*time.Minute)
	o := check(t, pool, ds, rep.Acks)
	receiver.RequireRunning(t)
	worker.RequireRunning(t)
	row.Offered, row.Acked, row.Stall = n, len(rep.Acks), rep.LongestGap
	row.Lost, row.Twice = o.lost(), o.twice()
	row.Note = fmt.Sprintf("%d of 30 connections held by another client until half was acknowledged (%s); failed attempts retried: %v",
		len(hog), released.Sub(held).Round(100*time.Millisecond), rep.Answers)
}

// exhaust opens connections to dbURL until the server refuses one for
// having too many, and returns those it opened; the test's cleanup closes
// any left open.
func exhaust(t *testing.T, dbURL string) []*pgx.Conn {
	t.Helper()
	var conns []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	})
	for range 1000 {
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, "a refusal by the server")
			require.Contains(t, []string{pgerrcode.TooManyConnections, pgerrcode.CannotConnectNow}, pgErr.Code, err.Error())
			return conns
		}
		conns = append(conns, conn)
	}
	t.Fatal("the server never refused a connection")
	return nil
}
