package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// The soak's worker settings: a short job timeout (River rescues a killed
// worker's jobs after rescue_after, a second more), a fast reaper, a
// short pause refresh, and a 2 s heartbeat: a routes record outlives its
// worker's last renewal by 6 s, so a cut handover's old set expires
// within the scene, and a worker that loses PostgreSQL fences itself
// after about 5 s, PostgreSQL restarts included.
const (
	soakJobTimeout = 10 * time.Second
	soakWorkerKeys = "reaper_interval: 1s\n  " + soakOrphanAfter + "\n  pause_refresh: 250ms\n  heartbeat_interval: 2s\n  " + soakQueues
	// soakApp is the application_name of the soak's own connections, which
	// pg_terminate_backend spares.
	soakApp = "hookinbox_soak"
	// soakLogTail is how many of the server's last log lines a failed run
	// prints (its cluster is removed when the run ends).
	soakLogTail = 200
)

// TestSoak is the soak (issue 40): two receivers and two ledger workers on
// one database play a schedule drawn from a seed (soakSchedule) of traffic
// on four sources (two more of them in soak_traffic_test.go), SIGKILLs and restarts, pg_terminate_backend of random
// backends, and pauses and resumes through inboxctl; after a quiet tail the
// oracle (soakOracle) checks the promises from the database and the
// processes' logs. `make soak` runs it (SOAK=1, SEED, DURATION);
// the same seed and duration replay the same schedule.
func TestSoak(t *testing.T) {
	t.Parallel()
	if os.Getenv("SOAK") == "" {
		t.Skip("the soak runs with `make soak` (SOAK=1)")
	}
	seed, duration := soakSeed(t), soakDuration(t)
	sched := newSchedule(seed, duration)
	fmt.Print(sched)
	began := time.Now()
	s := startSoak(t, sched)
	s.began = began
	s.play()
	tail := s.quietTail()
	if broken := s.oracle(); broken != "" {
		s.failNow(broken)
	}
	fmt.Printf("soak: PASSED seed %d in %.0fs (tail %.1fs): %s\n", seed, time.Since(began).Seconds(), tail.Seconds(), s.summary())
}

// failNow ends the run on a broken promise: the oracle's, or one a scene
// found while the schedule ran (a cut handover's old set working again, a
// worker exiting at start-up), where going on would only wait for what
// cannot come. It prints the verdict line that make soak-mutants reads
// (a promise a step noted before comes first, as in the oracle).
func (s *soak) failNow(broken string) {
	s.t.Helper()
	if first := s.ops.firstBroken(); first != "" {
		broken = first
	}
	seed, duration := s.sched.Seed, s.sched.Duration
	fmt.Printf("soak: FAILED seed %d after %.0fs: %s\n", seed, time.Since(s.began).Seconds(), broken)
	s.t.Fatalf("soak: seed %d (replay: make soak SEED=%d DURATION=%s): first promise broken: %s\n%s\n%s\nthe server's log, its last %d lines:\n%s",
		seed, seed, duration, broken, s.sched, s.workState(), soakLogTail, s.ops.cluster.logTail(soakLogTail))
}

// workState is what a failed run's reader needs to see who works what:
// the workers' routes records, River's queues and the jobs by queue and
// state.
func (s *soak) workState() string {
	rows, err := s.pool.Query(context.Background(), `(SELECT format('routes: queue %s, worker %s (pid %s), %s, started %s, expires in %ss: %s',
    queue, worker_id, pid, state, started_at, round(extract(epoch FROM expires_at - now())), routes)
FROM hookinbox_worker_routes ORDER BY queue, started_at)
UNION ALL (SELECT format('river queue %s: paused at %s, updated %s', name, coalesce(paused_at::text, 'never'), updated_at)
FROM river_queue ORDER BY name)
UNION ALL (SELECT format('jobs: queue %s, %s: %s', queue, state, count(*))
FROM river_job GROUP BY queue, state ORDER BY queue, state)`)
	if err != nil {
		return "work state: " + err.Error()
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "work state: " + err.Error()
	}
	return "work state at the verdict:\n" + strings.Join(lines, "\n")
}

// soakSeed is SOAK_SEED, or a random seed.
func soakSeed(t *testing.T) uint64 {
	if v := os.Getenv("SOAK_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "SOAK_SEED")
		return seed
	}
	return rand.Uint64() % 1_000_000
}

// soakDuration is SOAK_DURATION, 2m by default.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("SOAK_DURATION")
	if v == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "SOAK_DURATION")
	require.GreaterOrEqual(t, d, 20*time.Second, "SOAK_DURATION")
	return d
}

// pauseWindow is a time during which a source was surely paused, by the
// database's clock: from the pause's paused_at to just before the resume
// began.
type pauseWindow struct {
	source        string
	from, resumed time.Time
}

// soak is one run: its processes, what it sent and what was acknowledged.
type soak struct {
	t        *testing.T
	sched    *schedule
	began    time.Time     // before the binaries' build
	pool     *pgxpool.Pool // application_name soakApp
	configs  []string      // a receiver's config each (its own listen address); the first serves the workers and inboxctl
	worker   string        // the workers' config
	inboxctl string

	procs    map[string][]*proctest.Process // the running receivers and workers
	all      []*proctest.Process            // every process started, for the logs
	ctlLogs  []string                       // inboxctl's outputs
	urls     map[string][]string            // a source's webhook URLs, one per receiver
	pauses   []pauseWindow
	pausedAt map[string]time.Time
	w        soakWorkers // the worker side's (soak_worker_test.go)

	ops *soakOps     // the storage and operator steps' (soak_ops_test.go)
	tr  *soakTraffic // the batches, twins, sequencing scenes and bulk replays of done events (soak_traffic_test.go)
	out *soakOutbox  // the outbox side's (soak_outbox_test.go)

	mu    sync.Mutex
	acked map[string]map[string]bool // source → event id answered 2xx
	sent  map[string]map[string]faults.Deposit
	sends sync.WaitGroup
}

// startSoak prepares the database (the ledger's, with soakTrigger, on the
// soak's own cluster: soakCluster) and starts the receivers and the
// workers.
func startSoak(t *testing.T, sched *schedule) *soak {
	s := &soak{t: t, sched: sched, procs: map[string][]*proctest.Process{}, urls: map[string][]string{},
		acked: map[string]map[string]bool{}, sent: map[string]map[string]faults.Deposit{}, pausedAt: map[string]time.Time{}}
	dbURL := soakCluster(s)
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = soakApp
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(context.Background(), soakTrigger)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), soakWorkerTrigger)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), soakLostDatabase)
	require.NoError(t, err)
	s.pool = pool
	s.tr = s.startTraffic()
	s.out = startOutbox(s)
	s.inboxctl = proctest.Build(t, "../../cmd/receiver", "../../examples/ledger", "../../cmd/inboxctl")[2]
	for i := range soakProcesses {
		conf := setup{DB: dbURL, Listen: freePort(t), Job: soakJobTimeout, Worker: soakWorkerKeys + s.out.workerKeys(), Sources: s.shopSource() + trafficSources(),
			Route:  soakRouteDestinations,
			Routes: fmt.Sprintf("    - {source: %s, types: [%q], handlers: [ledger]%s}", soakSources[1], faults.DepositType, soakRouteDestinations) + trafficRoutes("ledger", soakRouteDestinations),
		}
		s.configs = append(s.configs, conf.write(t))
		s.start(receiverRole, i)
	}
	s.w.dbURL = dbURL
	s.worker = s.routeSetConfig(dbURL, 0)
	for i := range soakProcesses {
		s.start(workerRole, i)
	}
	for _, src := range soakSources {
		s.acked[src], s.sent[src] = map[string]bool{}, map[string]faults.Deposit{}
	}
	return s
}

// soakTrigger records every run of the ledger's handler that commits, with
// the time the handler began (soak_applied: the effects the oracle counts,
// which the ledger's own key on the event would hide), and makes deposits
// to slowAccount's accounts slow. The handler's first statement creates the account;
// a trigger there notes the time, before the statement can wait for
// another transaction's insert of the same account, and the entry's trigger
// records it.
var soakTrigger = fmt.Sprintf(`
CREATE TABLE soak_applied (source text NOT NULL, event_id text NOT NULL, began_at timestamptz NOT NULL);
CREATE FUNCTION soak_began() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('soak.began', clock_timestamp()::text, true);
    RETURN NEW;
END $$;
CREATE TRIGGER soak_began BEFORE INSERT ON ledger_accounts FOR EACH ROW EXECUTE FUNCTION soak_began();
CREATE FUNCTION soak_applied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO soak_applied VALUES (NEW.source, NEW.event_id, current_setting('soak.began')::timestamptz);
    IF NEW.account_id LIKE '%s%%' THEN
        PERFORM pg_sleep(%d);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_applied BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION soak_applied();`,
	slowAccount, int(slowSleep.Seconds()))

// start starts the index-th receiver or worker (again).
func (s *soak) start(role string, index int) {
	var p *proctest.Process
	if role == receiverRole {
		var url string
		p, url = startReceiver(s.t, s.configs[index])
		if len(s.urls[soakSources[0]]) <= index {
			base := url[:len(url)-len(soakSources[0])]
			for _, src := range soakSources {
				s.urls[src] = append(s.urls[src], base+src)
			}
		}
	} else {
		p, _ = startWorker(s.t, s.worker)
	}
	if len(s.procs[role]) <= index {
		s.procs[role] = append(s.procs[role], p)
	} else {
		s.procs[role][index] = p
	}
	s.all = append(s.all, p)
}

// play runs the schedule's steps at their times (a step that comes after a
// late one runs right after it), then waits for the sends to end.
func (s *soak) play() {
	// Steps run one after another, and on a busy machine the schedule
	// falls behind its clock: the deadline stops a step that hangs, not a
	// slow run (a 40 s schedule beside two other soaks on 2 cores ran over
	// by more than a minute).
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.sched.Duration+10*time.Minute)
	defer cancel()
	begin := time.Now()
	for i := range s.sched.Steps {
		st := &s.sched.Steps[i]
		if wait := time.Until(begin.Add(st.At + s.w.stopped)); wait > 0 {
			<-time.After(wait) // the schedule's clock, not a wait for a condition
		}
		s.do(ctx, st)
	}
	s.sends.Wait()
}

// do runs one step.
func (s *soak) do(ctx context.Context, st *step) {
	t := s.t
	switch st.Kind {
	case stepSend:
		var ds []faults.Deposit
		for _, d := range st.Deposits {
			for range st.Copies {
				ds = append(ds, d)
			}
		}
		s.mu.Lock()
		for _, d := range st.Deposits {
			s.sent[st.Source][d.ID] = d
		}
		s.mu.Unlock()
		secret, signed := s.signer(st.Source)
		sender := &faults.Sender{Targets: s.urls[st.Source], Secret: secret, Workers: 4, Timeout: 5 * time.Second}
		s.sends.Go(func() {
			defer signed()
			rep := sender.Run(ctx, ds)
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, a := range rep.Acks {
				s.acked[st.Source][a.ID] = true
			}
		})
	case stepKill:
		s.procs[st.Role][st.Index].Kill(t)
	case stepRestart:
		// A rollout or a queue move may have put a live process in the
		// killed one's place meanwhile.
		if s.procs[st.Role][st.Index].Exited() {
			s.start(st.Role, st.Index)
		}
	case stepTerm:
		s.terminate(st.Picks)
	case stepPause:
		s.ctl("sources", "pause", st.Source)
		var at time.Time
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT paused_at FROM hookinbox_source_pause WHERE source = $1`, st.Source).Scan(&at))
		s.pausedAt[st.Source] = at
	case stepResume:
		var now time.Time
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now))
		s.pauses = append(s.pauses, pauseWindow{source: st.Source, from: s.pausedAt[st.Source], resumed: now})
		s.ctl("sources", "resume", st.Source)
	case stepRollout, stepRetire, stepCutOff, stepReconnect:
		s.doWorker(ctx, st)
	case stepFeedDown:
		s.out.feedDown(time.Duration(st.Picks[0]) * time.Millisecond)
	case stepFeedCrash:
		s.feedCrash(ctx)
	default:
		if !s.doTraffic(ctx, st) {
			s.doOp(ctx, st)
		}
	}
}

// soakIndex is src's position in soakSources.
func soakIndex(src string) int {
	for i, s := range soakSources {
		if s == src {
			return i
		}
	}
	panic("soak: unknown source " + src)
}

// terminate ends the backends picks choose among the database's client
// backends (the soak's own spared).
func (s *soak) terminate(picks []uint64) {
	ctx := context.Background()
	rows, err := s.pool.Query(ctx, `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
  AND application_name <> $1 ORDER BY pid`, soakApp)
	require.NoError(s.t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(s.t, err)
	if len(pids) == 0 {
		return
	}
	for _, p := range picks {
		_, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pids[p%uint64(len(pids))])
		require.NoError(s.t, err)
	}
}

// ctl runs inboxctl with the first receiver's config; a run that fails
// (its connection may be among those terminated) is tried again, twice.
func (s *soak) ctl(args ...string) {
	for try := 0; ; try++ {
		code, out := proctest.Run(s.t, command(s.inboxctl, append(args, "--config", s.configs[0])...))
		s.ctlLogs = append(s.ctlLogs, out)
		if code == 0 {
			return
		}
		require.Less(s.t, try, 2, "inboxctl %v: %s", args, out)
	}
}

// quietTail waits, once the schedule has ended, until no event of the
// soak's sources is pending, soakTail at most, and returns how long
// that took.
func (s *soak) quietTail() time.Duration {
	began := time.Now()
	for time.Since(began) < soakTail {
		if len(s.pending()) == 0 {
			break
		}
		<-time.After(100 * time.Millisecond) // polling a condition with a deadline
	}
	return time.Since(began)
}

// pending returns the soak's events not done nor failed, the jobs of done
// events left waiting on the queue the shop source moved off (the reaper
// moves them, to run as no-ops: "Strays" in docs/design.md), its bulk replays
// still running, and its outbox messages not delivered nor failed.
func (s *soak) pending() []string {
	dead := ""
	if s.ops.moved {
		dead = soakQueueA
	}
	// Each event with what it waits for: its attempts and last error, and
	// its newest job's state, attempt, errors (the last one's text: a run
	// River counted but the row was not charged for says why) and when
	// River runs it next.
	rows, err := s.pool.Query(context.Background(), `(SELECT format('%s/%s %s (attempts %s, last error %s; job %s %s on queue %s, attempt %s, %s errors, runs in %ss, its last error %s)',
    i.source, i.event_id, i.status, i.attempts, coalesce(left(i.last_error, 60), 'none'),
    j.id, coalesce(j.state::text, 'none'), j.queue, j.attempt, coalesce(array_length(j.errors, 1), 0),
    round(extract(epoch FROM j.scheduled_at - now())), coalesce(left(j.errors[array_length(j.errors, 1)]->>'error', 120), 'none'))
FROM webhook_inbox AS i LEFT JOIN LATERAL (SELECT * FROM river_job WHERE kind = 'hookinbox.event' AND (args->>'inbox_id')::bigint = i.id
    ORDER BY id DESC LIMIT 1) AS j ON true
WHERE i.status NOT IN ('done', 'failed') ORDER BY i.id LIMIT 10)
UNION ALL (SELECT format('job %s (%s) of done event %s/%s waits on queue %s, which no worker works', j.id, j.state, i.source, i.event_id, j.queue)
FROM river_job AS j JOIN webhook_inbox AS i ON i.id = (j.args->>'inbox_id')::bigint
WHERE j.kind = 'hookinbox.event' AND j.queue = $1 AND j.state IN ('available', 'retryable', 'scheduled') AND i.status = 'done'
ORDER BY j.id LIMIT 10)
UNION ALL (SELECT 'bulk replay ' || id || ' running' FROM hookinbox_replay WHERE state = 'running')
UNION ALL (`+outboxPending+` ORDER BY id LIMIT 10)`, dead)
	require.NoError(s.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(s.t, err)
	return ids
}
