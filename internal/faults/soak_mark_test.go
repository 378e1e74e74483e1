package faults_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// The mark scene of every cut handover (issue 40). A newer route set that
// worked a queue leaves, once its records expire, a mark: the expired
// record keeps every older route set off the queue until a newer claim on
// that queue still (pkg/worker's registration). The 30-minute soaks found
// it undone twice: a PostgreSQL restart during a cut handover expired the
// newer set's records too, and the older set's claim deleted them (mutant
// older-claim-deletes-newer-mark), or a claim on another queue did
// (claim-on-another-queue-deletes-mark); the older set's worker, back
// first, worked the queue again, and the newer set's retired: the rollout
// went backwards. And a PostgreSQL restart under a worker's start-up claim
// made it exit 1 (start-retries-only-connect-errors), as did, after one,
// River's start running out of its own 10 s to write its queue's row on a
// busy machine (start-gives-up-on-rivers-timeout; seed 101). The scene
// plays them on purpose, once the newer set works the cut set's queue:
//  1. the newer set's proxy is cut in turn, and a worker of another queue
//     (the newest config, working only River's default queue) starts
//     while the soak holds the registration lock, so that its start-up
//     claim waits on it;
//  2. once the database shows none of the newer set's records live (they
//     expire three heartbeats after the last renewal: 6 s), PostgreSQL
//     restarts under that claim, and the worker must start on the
//     restarted server: its claim is the first since the records expired.
//     In a schedule's first scene, River's first write of the worker's
//     queue row then sleeps past River's bound (soakSlowStart), and the
//     worker must start again rather than exit;
//  3. the cut set's proxy opens, first: each of its workers that worked
//     must find the newer set's mark and retire, never work the queue
//     again;
//  4. the newer set's proxy opens; the worker of another queue stops.
//
// Steps run one after another, so nothing else of the schedule comes in
// between (no kill, no queue move); the schedule's clock stops meanwhile,
// so that the steps after the scene keep their spacing.

// soakRegistrationLock is pkg/worker's registrationLock: the advisory lock
// every routes claim takes first.
const soakRegistrationLock int64 = 0x686b726f75746573 // "hkroutes"

// otherQueueApp is the application_name suffix of the mark scene's worker
// of another queue: its route set's name, then this (soak_applied.app
// still names the set).
const otherQueueApp = "_other"

// reconnect is a cut handover's reconnection, with its mark scene: it
// waits until a worker of the newer set works the cut set's queue (the cut
// set's records expired, and the newer set's claim deleted them), then
// plays the scene.
func (s *soak) reconnect(ctx context.Context) {
	s.pollUntil(ctx, "cut handover: no worker of route set %d took the cut set's queue over", func(ctx context.Context) (bool, error) {
		var working bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hookinbox_worker_routes WHERE pid = ANY($1) AND state = 'working')`,
			pids(s.w.next)).Scan(&working)
		return working, err
	}, s.w.gen)
	began := time.Now()
	defer func() { s.w.stopped += time.Since(began) }()
	s.w.newer.Cut()
	// The worker of another queue starts meanwhile: its claim waits for
	// the lock.
	holder := s.holdRegistrationLock(ctx)
	defer holder.Close(context.WithoutCancel(ctx)) // dead by then: the restart ended it
	app := fmt.Sprintf("soak_routes_%d%s", s.w.gen, otherQueueApp)
	slowStart := s.w.slowStart == ""
	if slowStart {
		armSlowStart(s.t, s.pool, app, 1)
		s.w.slowStart = app
	}
	other, _ := startWorker(s.t, s.queuesConfig(app, "default"))
	s.all = append(s.all, other)
	s.pollUntil(ctx, "mark scene: a record of route set %d still live after its proxy was cut", func(ctx context.Context) (bool, error) {
		var live bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hookinbox_worker_routes WHERE pid = ANY($1) AND expires_at > now())`,
			pids(s.w.next)).Scan(&live)
		return !live, err
	}, s.w.gen)
	expired := time.Since(began)
	waitedAt, restartedAt := s.restartUnderClaim(ctx, other, app)
	waited, restarted := waitedAt.Sub(began), restartedAt.Sub(began)
	started := time.Since(began)
	if slowStart && !strings.Contains(other.Log(), riversStartTimedOut) {
		s.failNow(fmt.Sprintf("mark scene: the worker of another queue (pid %d) started, but never ran out of River's time to start: "+
			"the slow start checked nothing", other.PID()))
	}
	s.w.proxy.Open()
	s.awaitCutSetBack(ctx)
	back := time.Since(began)
	s.w.newer.Open()
	other.Stop(s.t)
	marks := 0
	for _, p := range s.w.cut {
		for _, line := range strings.Split(p.Log(), "\n") {
			if strings.Contains(line, foundNewerWorking) && strings.Contains(line, `"their_record_expired":true`) {
				marks++
				break
			}
		}
	}
	fmt.Printf("soak: mark scene of route set %d: its records expired after %.1fs; the worker of another queue waited for "+
		"the lock after %.1fs, PostgreSQL was back after %.1fs, the worker started (again %d times) after %.1fs; "+
		"%d workers of the cut set found the mark after %.1fs; %.1fs in all\n",
		s.w.gen, expired.Seconds(), waited.Seconds(), restarted.Seconds(), strings.Count(other.Log(), "could not start the worker; retrying"),
		started.Seconds(), marks, back.Seconds(), time.Since(began).Seconds())
}

// pids returns the processes' pids.
func pids(ps []*proctest.Process) []int {
	out := make([]int, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.PID())
	}
	return out
}

// pollUntil polls cond (an error counts as not yet: PostgreSQL may be
// restarting) until it holds, cutHandoverWait at most, and fails the test
// with what (formatted with args) after.
func (s *soak) pollUntil(ctx context.Context, what string, cond func(context.Context) (bool, error), args ...any) {
	s.t.Helper()
	for began := time.Now(); ; {
		ok, err := cond(ctx)
		if err == nil && ok {
			return
		}
		if time.Since(began) > cutHandoverWait {
			s.t.Fatalf(what+" within %s (%v)", append(args, cutHandoverWait, err)...)
		}
		<-time.After(50 * time.Millisecond) // polling a condition with a deadline
	}
}

// holdRegistrationLock takes the registration lock in a transaction of
// its own connection (application_name soakApp), and returns the
// connection: every routes claim waits until it ends.
func (s *soak) holdRegistrationLock(ctx context.Context) *pgx.Conn {
	cfg, err := pgx.ParseConfig(s.ops.url)
	require.NoError(s.t, err)
	cfg.RuntimeParams["application_name"] = soakApp
	holder, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(s.t, err)
	_, err = holder.Exec(ctx, `BEGIN`)
	require.NoError(s.t, err)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, soakRegistrationLock)
	require.NoError(s.t, err)
	return holder
}

// restartUnderClaim restarts PostgreSQL once the start-up claim of p (a
// worker connecting as app) waits for the registration lock, which the
// soak holds, and waits until p has started on the restarted server. One
// that exits instead breaks the promise that a worker degrades, and does
// not crash, while its database restarts: the run ends there.
// It returns when the claim was seen waiting and when PostgreSQL was back.
func (s *soak) restartUnderClaim(ctx context.Context, p *proctest.Process, app string) (waited, restarted time.Time) {
	s.pollUntil(ctx, "mark scene: the worker of another queue never waited for the registration lock", func(ctx context.Context) (bool, error) {
		var waits bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1)`, app).Scan(&waits)
		return waits || p.Exited(), err
	})
	require.False(s.t, p.Exited(), "mark scene: the worker of another queue exited before its routes claim:\n%s", p.Log())
	waited = time.Now()
	// A durable commit flushes the WAL before the immediate stop. The
	// routes claims commit durably themselves since e55f492; this flush
	// predates that, and also hides a mutant that undid it (none yet).
	_, err := s.pool.Exec(ctx, `BEGIN; SET LOCAL synchronous_commit = on; UPDATE soak_slow_completions SET until = until; COMMIT`)
	require.NoError(s.t, err)
	s.pgRestart(ctx)
	restarted = time.Now()
	s.pollUntil(ctx, "mark scene: the worker of another queue neither started nor exited after PostgreSQL restarted under its routes claim",
		func(context.Context) (bool, error) {
			return claimedOrExited(p), nil
		})
	if p.Exited() {
		s.failNow(fmt.Sprintf("a worker (pid %d) exited at start-up when PostgreSQL restarted under its routes claim, instead of starting again: %s",
			p.PID(), lastLine(p.Log())))
	}
	return waited, restarted
}

// queuesConfig writes the newest route set's worker config, connecting
// straight to the database as app, working queues (a YAML list's items)
// alone: the mark scene's worker works River's default queue, its claims
// on another queue than the cut set's; the slow-start scene's, two queues
// of its own.
func (s *soak) queuesConfig(app, queues string) string {
	b, err := os.ReadFile(s.routeSetConfig(s.w.dbURL, s.w.gen))
	require.NoError(s.t, err)
	text := strings.Replace(string(b), fmt.Sprintf("application_name=soak_routes_%d", s.w.gen), "application_name="+app, 1)
	key := "queues: [" + queues + "]"
	text = workerQueues.ReplaceAllString(text, key)
	require.Contains(s.t, text, key+"\n")
	path := filepath.Join(s.t.TempDir(), app+".yaml")
	require.NoError(s.t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// workerQueues matches the worker.queues key of a config.
var workerQueues = regexp.MustCompile(`queues: \[[^\]]*\]`)

// lastLine returns the last line of a process's output: an exiting
// daemon's error.
func lastLine(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	return lines[len(lines)-1]
}

// awaitCutSetBack waits until each of the cut set's workers that worked
// its queue and still runs has reached the database again and found the
// newer set's mark (the newer set is still cut off: its records have
// expired). One that works the queue again instead (a live record of its
// saying working) breaks promise 3 by construction: the rollout went
// backwards, and the run ends there.
func (s *soak) awaitCutSetBack(ctx context.Context) {
	for _, p := range s.w.cut {
		if !workedQueue(p) {
			continue
		}
		var back bool
		s.pollUntil(ctx, "mark scene: a worker of the cut set (pid %d) never came back", func(ctx context.Context) (bool, error) {
			if p.Exited() || strings.Contains(p.Log(), foundNewerWorking) {
				return true, nil
			}
			err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hookinbox_worker_routes WHERE pid = $1 AND state = 'working' AND expires_at > now())`,
				p.PID()).Scan(&back)
			return back, err
		}, p.PID())
		if back {
			s.failNow(fmt.Sprintf("the rollout went backwards: a worker of route set %d (pid %d), back after route set %d worked its queue "+
				"and was cut off in turn, works the queue again (its records say working)", s.w.gen-1, p.PID(), s.w.gen))
		}
	}
}

// workedQueue reports whether the worker's log says it worked its queue.
func workedQueue(p *proctest.Process) bool {
	l := p.Log()
	return strings.Contains(l, `"msg":"worker started","state":"working"`) || strings.Contains(l, `"msg":"taking over:`)
}
