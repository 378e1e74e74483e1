package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// workerBinaries are the test workers the process tests run.
type workerBinaries struct {
	seq, stamp string // testdata/seqworker, testdata/stampworker
}

// testWorkers builds the test workers together (one go build links them in
// parallel) once per test process.
func testWorkers(t *testing.T) workerBinaries {
	t.Helper()
	bins := proctest.Build(t, "./testdata/seqworker", "./testdata/stampworker")
	return workerBinaries{seq: bins[0], stamp: bins[1]}
}

// TestSequenceThreeProcesses runs three worker processes on one sequenced
// route: a backlog of 500 events over 20 keys, ingested in shuffled order
// before they start, then 100 more that arrive, shuffled, while they work.
// One process is killed with SIGKILL mid-stream. Every event runs exactly
// once; no two runs of a key overlap; the backlog runs in version order per
// key; and every run of the stream is either in order or flagged late.
func TestSequenceThreeProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills subprocesses")
	}
	const keys, backlogPerKey, streamPerKey = 20, 25, 5
	bin := testWorkers(t).seq
	db := dbtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
CREATE TABLE seqlog (key text NOT NULL, v int NOT NULL, late bool NOT NULL,
                     started timestamptz NOT NULL, ended timestamptz NOT NULL)`)
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 10})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
	ingest := func(evs [][2]int) {
		for _, e := range evs {
			payload := fmt.Appendf(nil, `{"data":{"key":"k%d","v":%d}}`, e[0], e[1])
			res, err := ingester.Ingest(ctx, &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: payload,
				Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("k%d_%d", e[0], e[1]), Type: "seq", Payload: payload}}})
			require.NoError(t, err)
			require.Equal(t, 1, res.New)
		}
	}
	shuffled := func(from, to int) [][2]int {
		var evs [][2]int
		for k := range keys {
			for v := from; v < to; v++ {
				evs = append(evs, [2]int{k, v})
			}
		}
		rand.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		return evs
	}
	ingest(shuffled(0, backlogPerKey))

	path := filepath.Join(t.TempDir(), "seq.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `
database: {url: %q, max_conns: 8}
log: {level: info}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
worker:
  listen: "127.0.0.1:0"
  concurrency: 4
  job_timeout: 2s
  rescue_after: 3s
  fetch_poll_interval: 50ms
  soft_stop_timeout: 5s
  routes:
    - source: bank
      types: [seq]
      handlers: [seqlog]
      sequence: {key: data.key, order: data.v}
`, db.URL), 0o600))
	done := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'done'`).Scan(&n))
		return n
	}
	var procs []*proctest.Process
	for range 3 {
		cmd := exec.Command(bin, "--config", path)
		cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=")
		procs = append(procs, proctest.Start(t, cmd))
	}
	procs[0].WaitUntil(t, 120*time.Second, func() bool { return done() >= 150 })
	procs[0].Kill(t)
	ingest(shuffled(backlogPerKey, backlogPerKey+streamPerKey))
	total := keys * (backlogPerKey + streamPerKey)
	procs[1].WaitUntil(t, 180*time.Second, func() bool { return done() == total })

	var runs, distinct, overlaps int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (key, v)) FROM seqlog`).Scan(&runs, &distinct))
	require.Equal(t, total, runs, "every event exactly once")
	require.Equal(t, total, distinct)
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM seqlog a JOIN seqlog b ON a.key = b.key AND a.v < b.v
WHERE tstzrange(a.started, a.ended, '[]') && tstzrange(b.started, b.ended, '[]')`).Scan(&overlaps))
	require.Zero(t, overlaps, "two runs of one key overlapped")

	rows, err := db.Pool.Query(ctx, `SELECT key, v, late FROM seqlog ORDER BY key, started`)
	require.NoError(t, err)
	defer rows.Close()
	highest := map[string]int{}
	for rows.Next() {
		var (
			key  string
			v    int
			late bool
		)
		require.NoError(t, rows.Scan(&key, &v, &late))
		prev, seen := highest[key]
		if v < backlogPerKey {
			require.False(t, late, "backlog event %s/%d ran late", key, v)
			require.True(t, !seen || v == prev+1, "backlog of %s: %d ran after %d", key, v, prev)
		} else {
			require.Equal(t, seen && v < prev, late, "%s/%d after %d: late must say whether it ran out of order", key, v, prev)
		}
		highest[key] = max(prev, v)
	}
	require.NoError(t, rows.Err())
	procs[1].Stop(t)
	procs[2].Stop(t)
}

// TestSequenceBackToBackTwoProcesses drains a backlog of one key, ingested
// in shuffled order before they start, with two worker processes whose
// fetch poll interval is 10 minutes: every event of the key runs once, in
// version order, never two at once across the processes, and the backlog
// ends well before the first poll. When an event of the key commits, the next one
// is runnable at once, on either process: a waiting event that relied on a
// poll (a snooze, a missed wake) would hold the backlog past 30 s.
func TestSequenceBackToBackTwoProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs subprocesses")
	}
	const events = 200
	bin := testWorkers(t).seq
	db := dbtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
CREATE TABLE seqlog (key text NOT NULL, v int NOT NULL, late bool NOT NULL,
                     started timestamptz NOT NULL, ended timestamptz NOT NULL)`)
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 10})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
	for _, v := range rand.Perm(events) {
		payload := fmt.Appendf(nil, `{"data":{"key":"k","v":%d}}`, v)
		res, err := ingester.Ingest(ctx, &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: payload,
			Events: []inboxstore.IncomingEvent{{ID: fmt.Sprint("k_", v), Type: "seq", Payload: payload}}})
		require.NoError(t, err)
		require.Equal(t, 1, res.New)
	}
	path := filepath.Join(t.TempDir(), "seq.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `
database: {url: %q, max_conns: 8}
log: {level: info}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
worker:
  listen: "127.0.0.1:0"
  concurrency: 4
  fetch_poll_interval: 10m
  soft_stop_timeout: 5s
  routes:
    - source: bank
      types: [seq]
      handlers: [seqlog]
      sequence: {key: data.key, order: data.v}
`, db.URL), 0o600))
	var procs []*proctest.Process
	start := time.Now()
	for range 2 {
		cmd := exec.Command(bin, "--config", path)
		cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=")
		procs = append(procs, proctest.Start(t, cmd))
	}
	// A poll comes 10 minutes after a process starts at the earliest.
	procs[0].WaitUntil(t, 3*time.Minute, func() bool {
		var done int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'done'`).Scan(&done))
		return done == events
	})
	t.Logf("%d events of one key in %s, with two processes", events, time.Since(start).Round(time.Millisecond))

	rows, err := db.Pool.Query(ctx, `SELECT v, late FROM seqlog ORDER BY started`)
	require.NoError(t, err)
	type run struct {
		V    int
		Late bool
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[run])
	require.NoError(t, err)
	require.Len(t, runs, events, "every event exactly once")
	for i, r := range runs {
		require.Equal(t, run{V: i}, r, "run %d", i)
	}
	var overlaps int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM seqlog a JOIN seqlog b ON a.v < b.v
WHERE tstzrange(a.started, a.ended, '[]') && tstzrange(b.started, b.ended, '[]')`).Scan(&overlaps))
	require.Zero(t, overlaps, "two runs of one key overlapped")
	procs[0].Stop(t)
	procs[1].Stop(t)
}
