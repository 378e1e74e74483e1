package faults_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
)

// restartHealBound bounds the time from a restart to every row pending at
// the restart done: River's completer retries a completion for at most
// about 37 s, the reaper acts 5 s after it at its next pass (1 min); a
// completion given up is rescued once rescue_after (4 s) has passed.
const restartHealBound = 2 * time.Minute

// TestPostgresImmediateStops is scenario 10: the database server of a
// receiver and a ledger worker is stopped with pg_ctl stop -m immediate
// under load, again and again (20 times in make faults), with the default
// reaper settings. After each restart it measures the time until every row
// pending at the restart is done: a done mark lost with an asynchronous
// commit whose job River's completer completed after the restart waits
// for the reaper's next pass. The worst of those times is the row's
// recover figure; nothing may be lost or applied twice.
func TestPostgresImmediateStops(t *testing.T) {
	t.Parallel()
	row := record(t, "10 PostgreSQL immediate stops, lost done marks")
	c := newCluster(t, "max_connections = 40")
	dbURL := c.createDB(t, "faults")
	config := setup{DB: dbURL, Job: 3 * time.Second}.write(t)
	migrate(t, dbURL)
	_, target := startReceiver(t, config)
	worker, _ := startWorker(t, config)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()

	stops, batch := size(2, 20), size(300, 400)
	sender := &faults.Sender{Targets: []string{target}, Secret: secret, Workers: 2, Every: 5 * time.Millisecond}
	var (
		all   []faults.Deposit
		acks  []faults.Ack
		waits []time.Duration
	)
	for i := range stops {
		ds := faults.Deposits(fmt.Sprintf("stop%02d", i), batch, 7)
		all = append(all, ds...)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		reports := make(chan *faults.Report, 1)
		before := sender.Acked()
		go func() { reports <- sender.Run(ctx, ds) }()
		// The stop comes while deliveries are answered and events worked.
		worker.WaitUntil(t, time.Minute, func() bool { return sender.Acked() >= before+int64(batch/2) })
		c.stop(t, "immediate")
		c.start(t)
		up := time.Now()
		var last int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM webhook_inbox`).Scan(&last))
		worker.WaitUntil(t, restartHealBound, func() bool { return !pendingUpTo(t, pool, last) })
		waits = append(waits, time.Since(up))
		rep := <-reports
		cancel()
		require.Len(t, rep.Acks, batch, "deliveries acknowledged (failed attempts: %v)", rep.Answers)
		acks = append(acks, rep.Acks...)
		t.Logf("stop %d: rows pending at the restart done %s after it", i+1, waits[i].Round(10*time.Millisecond))
	}
	waitDone(t, worker, pool, len(all), restartHealBound)
	o := checkEffects(t, pool, all, acks)
	requeued, _ := reaperCounts(worker)
	worker.RequireRunning(t)
	row.Offered, row.Acked, row.Lost, row.Twice = len(all), len(acks), o.lost(), o.twice()
	row.Recover = maxDuration(waits)
	row.Note = fmt.Sprintf("%d immediate stops; rows pending at a restart all done after at most %s (median %s); lost commits healed: %d requeued",
		stops, row.Recover.Round(10*time.Millisecond), median(waits).Round(10*time.Millisecond), requeued)
}

// pendingUpTo reports whether a row of id up to last is pending.
func pendingUpTo(t *testing.T, pool *pgxpool.Pool, last int64) bool {
	t.Helper()
	var found bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM webhook_inbox WHERE status = 'pending' AND id <= $1)`, last).Scan(&found))
	return found
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
