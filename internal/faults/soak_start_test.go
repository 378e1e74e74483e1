package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// The slow-start scene (issue 40): a worker starts while the database is
// too slow for River's own bound on its start, and River's start fails
// after one of its queues' producers began, with that queue's events
// running. River cancels them with the start's error and counts each an
// attempt; the worker starts again (pkg/daemon) and must put such a run
// back uncharged (mutant failed-start-cut-charged), and must not exit
// (start-gives-up-on-rivers-timeout). By construction:
//  1. a worker of the newest route set's config, working two queues no
//     other worker works (slowStartQueues), with a job's time longer than
//     River's bound, starts with its client's second write of a queue's
//     row armed to sleep past River's 10 s (soakSlowStart), and its first
//     armed to wait until both queues have jobs;
//  2. once its routes record is in (its queues are then live, and the
//     reaper leaves their jobs where they are), the scene claims
//     slowStartEvents events of the bank source on each queue, whose
//     handlers wait at a gate (soakStartGate) until the worker's client
//     writes a queue's row a third time: the start after the failed one.
//     Whichever queue River starts first, its events are running when
//     River's bound runs out;
//  3. the worker must log River's timed-out start and start again, its
//     routes record read live all along (the soak's heartbeat keeps it 6 s
//     past a renewal: mutant rollout-loop-waits-for-start), and every
//     event be done, with no attempt counted in River, and the runs the
//     failed start cut put back, not as lost connections (a scene that
//     cut none checked nothing).
//
// The schedule's clock stops meanwhile, as for the mark scene.

// stepSlowStart is the slow-start scene's step.
const stepSlowStart stepKind = "slowstart" // a worker of two queues of its own starts into River's failed start, Deposits running on one

const (
	// slowStartApp is the scene's worker's application_name: no route
	// set's (soak_routes_N), so checkRouteSets leaves its runs out.
	slowStartApp = "soak_slow_start"
	// slowStartEvents is how many events the scene claims on each queue.
	slowStartEvents = 4
	// slowStartJobTimeout is the scene's worker's job_timeout: its gated
	// runs outlast River's bound, 10 s from its second write.
	slowStartJobTimeout = 30 * time.Second
	// gatePrefix begins the scene's accounts (soakStartGate).
	gatePrefix = "acc_gate_"
	// riversStartTimedOut is in the line of a worker that retries a start
	// River's own bound cut (pkg/daemon's startWorker).
	riversStartTimedOut = "StartWorkContext timed out after 10s"
	// startCutLine is what the worker logs when it puts back a run River's
	// failed start cut (pkg/worker's reportResult).
	startCutLine = "event put back, no attempt counted: River's start failed under it"
	// soakPutBacksKey is pkg/worker's putBacksKey: a job's put-backs for a
	// lost connection, in its metadata.
	soakPutBacksKey = "hookinbox:put_backs"
)

// slowStartQueues are the scene's worker's queues.
var slowStartQueues = []string{"soak_start_a", "soak_start_b"}

// soakSlowStart makes River's writes to river_queue slow for a client
// whose application_name soak_slow_start holds (armSlowStart): the nth
// write (a start's, setting its queues' rows) sleeps 11 s, past River's
// 10-s bound on it (a server recovering from a restart on a busy machine);
// with await, each write before it first waits, 8 s at most, until every
// one of those queues has a job. Each app counts its writes in a sequence
// of its own: nextval outlives the statement's cancellation, so the start
// after the slow one goes through.
const soakSlowStart = `
CREATE TABLE soak_slow_start (app text PRIMARY KEY, nth int NOT NULL, await text[]);
CREATE FUNCTION soak_slow_start() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s soak_slow_start;
    n bigint;
    began timestamptz := clock_timestamp();
BEGIN
    SELECT * INTO s FROM soak_slow_start WHERE app = current_setting('application_name');
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    n := nextval(quote_ident('soak_slow_start_' || s.app)::regclass);
    IF n = s.nth THEN
        PERFORM pg_sleep(11);
    ELSIF n < s.nth AND s.await IS NOT NULL THEN
        WHILE clock_timestamp() < began + interval '8 seconds'
          AND (SELECT count(DISTINCT queue) FROM river_job WHERE queue = ANY (s.await)) < cardinality(s.await) LOOP
            PERFORM pg_sleep(0.05);
        END LOOP;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_slow_start BEFORE INSERT OR UPDATE ON river_queue FOR EACH ROW EXECUTE FUNCTION soak_slow_start();`

// soakStartGate holds a deposit to gatePrefix's accounts (the slow-start
// scene's) until the scene's worker has written a queue's row a third
// time (soakSlowStart's sequence for slowStartApp: its start after the
// failed one), 25 s at most.
var soakStartGate = fmt.Sprintf(`
CREATE FUNCTION soak_start_gate() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    began timestamptz := clock_timestamp();
BEGIN
    IF NEW.account_id LIKE '%s%%' THEN
        WHILE clock_timestamp() < began + interval '25 seconds'
          AND coalesce((SELECT last_value FROM pg_sequences WHERE sequencename = 'soak_slow_start_%s'), 0) < 3 LOOP
            PERFORM pg_sleep(0.05);
        END LOOP;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_start_gate BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION soak_start_gate();`, gatePrefix, slowStartApp)

// armSlowStart arms soakSlowStart for app's nth write, the writes before
// it waiting for jobs on the await queues.
func armSlowStart(t *testing.T, pool *pgxpool.Pool, app string, nth int, await ...string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "CREATE SEQUENCE "+pgx.Identifier{"soak_slow_start_" + app}.Sanitize())
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), `INSERT INTO soak_slow_start (app, nth, await) VALUES ($1, $2, $3)`, app, nth, await)
	require.NoError(t, err)
}

// addSlowStartScene adds the slow-start scene to s, from a generator of its
// own, 5 s into the schedule up to its middle, where the bank source is
// not paused (its events must run).
func addSlowStartScene(s *schedule) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x5105))
	ds := make([]faults.Deposit, 0, len(slowStartQueues)*slowStartEvents)
	for n := range cap(ds) {
		ds = append(ds, faults.Deposit{ID: fmt.Sprintf("%s_start%d", soakSources[0], n), Account: fmt.Sprintf("%s%d", gatePrefix, n),
			Cents: int64(100 + rng.IntN(10000)), Type: hangType})
	}
	from := 5*time.Second + time.Duration(rng.Int64N(int64(max(s.Duration/2-5*time.Second, time.Second))))
	at, ok := s.clearOfPauses(soakSources[0], from, s.Duration-5*time.Second, time.Second)
	if !ok {
		at, ok = s.clearOfPauses(soakSources[0], 5*time.Second, s.Duration-5*time.Second, time.Second)
	}
	if ok {
		s.Steps = append(s.Steps, step{At: at, Kind: stepSlowStart, Source: soakSources[0], Deposits: ds})
	}
}

// slowStartScene plays the slow-start scene.
func (s *soak) slowStartScene(ctx context.Context, st *step) {
	began := time.Now()
	defer func() { s.w.stopped += time.Since(began) }()
	armSlowStart(s.t, s.pool, slowStartApp, 2, slowStartQueues...)
	config := s.queuesConfig(slowStartApp, strings.Join(slowStartQueues, ", "))
	b, err := os.ReadFile(config)
	require.NoError(s.t, err)
	require.Contains(s.t, string(b), timeoutKeys(soakJobTimeout))
	b = []byte(strings.Replace(string(b), timeoutKeys(soakJobTimeout), timeoutKeys(slowStartJobTimeout), 1))
	require.NoError(s.t, os.WriteFile(config, b, 0o600))
	p := proctest.Start(s.t, command(ledgerBin(s.t), "--config", config))
	s.all = append(s.all, p)
	s.pollUntil(ctx, "slow-start scene: the worker never claimed its queues", func(ctx context.Context) (bool, error) {
		var claimed bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hookinbox_worker_routes WHERE pid = $1)`, p.PID()).Scan(&claimed)
		return claimed || p.Exited(), err
	})
	ids := make([]string, 0, len(st.Deposits))
	for i, queue := range slowStartQueues {
		deposits := st.Deposits[i*slowStartEvents : (i+1)*slowStartEvents]
		s.claimOnQueue(ctx, queue, st.Source, "soak-slow-start", deposits)
		for _, dep := range deposits {
			ids = append(ids, dep.ID)
		}
	}
	// Read all along: its routes record must stay live while River's
	// start runs (it lives 6 s past a renewal, and the start runs 10 s).
	expired := false
	s.pollUntil(ctx, "slow-start scene: the worker neither started nor exited", func(ctx context.Context) (bool, error) {
		var live bool
		err := s.pool.QueryRow(ctx, `SELECT coalesce(bool_and(expires_at > now()), true) FROM hookinbox_worker_routes WHERE pid = $1`, p.PID()).Scan(&live)
		expired = expired || (err == nil && !live)
		return claimedOrExited(p), nil
	})
	if p.Exited() {
		s.failNow(fmt.Sprintf("a worker (pid %d) exited at start-up when River's start ran out of its time, instead of starting again: %s",
			p.PID(), lastLine(p.Log())))
	}
	if !strings.Contains(p.Log(), riversStartTimedOut) {
		s.failNow(fmt.Sprintf("slow-start scene: the worker (pid %d) started, but never ran out of River's time to start: the scene checked nothing", p.PID()))
	}
	if expired {
		s.failNow(fmt.Sprintf("slow-start scene: the routes record of a worker (pid %d) expired while River's start ran: its renewals waited for "+
			"the start, and its queues were dead to the reaper (a waiting route set would have taken them)", p.PID()))
	}
	s.pollUntil(ctx, "slow-start scene: its events were not done", func(ctx context.Context) (bool, error) {
		var done int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE source = $1 AND event_id = ANY($2) AND status = 'done'`,
			st.Source, ids).Scan(&done)
		return done == len(ids), err
	})
	var counted, putBacks int
	var last string
	require.NoError(s.t, s.pool.QueryRow(ctx, `
WITH jobs AS (
  SELECT j.* FROM river_job AS j JOIN webhook_inbox AS i ON i.id = (j.args->>'inbox_id')::bigint
  WHERE j.kind = $1 AND i.source = $2 AND i.event_id = ANY($3)
)
SELECT (SELECT count(*) FROM jobs CROSS JOIN LATERAL unnest(jobs.errors) AS e WHERE e->>'error' <> $4),
  (SELECT coalesce(sum((metadata->>$5)::int), 0) FROM jobs),
  coalesce((SELECT left(e->>'error', 200) FROM jobs CROSS JOIN LATERAL unnest(jobs.errors) AS e WHERE e->>'error' <> $4 LIMIT 1), '')`,
		inboxstore.JobKind, st.Source, ids, rescuedError, soakPutBacksKey).Scan(&counted, &putBacks, &last))
	cut := strings.Count(p.Log(), startCutLine)
	switch {
	case counted > 0:
		s.failNow(fmt.Sprintf("slow-start scene: River counted %d failed attempts of events whose runs only River's failed start cut (%s)", counted, last))
	case putBacks > 0:
		// No connection of the scene's runs was lost (the schedule waits):
		// a put-back counted is a cut spending what a lost connection gets
		// uncharged (mutant start-cuts-spend-put-backs).
		s.failNow(fmt.Sprintf("slow-start scene: %d runs River's failed start cut were counted as lost connections (%s), "+
			"spending the put-backs a lost connection gets uncharged", putBacks, soakPutBacksKey))
	case cut == 0:
		s.failNow("slow-start scene: River's failed start cut no run of the worker, and so checked nothing")
	}
	p.Stop(s.t)
	fmt.Printf("soak: slow-start scene: the worker started (again %d times) after River's start timed out, %d runs it cut put back, "+
		"%d events done; %.1fs in all\n", strings.Count(p.Log(), "could not start the worker; retrying"), cut, len(ids), time.Since(began).Seconds())
}

// checkSlowStartScene checks the slow-start scene's place in s, a schedule
// d long: once, where the bank source is not paused.
func checkSlowStartScene(t *testing.T, s *schedule, d time.Duration) {
	t.Helper()
	scenes := 0
	for _, st := range s.Steps {
		if st.Kind != stepSlowStart {
			continue
		}
		scenes++
		_, free := s.clearOfPauses(st.Source, st.At, st.At+time.Millisecond, time.Second)
		require.True(t, free, "seed %d, %s: the slow-start scene at %s, while %s is paused", s.Seed, d, st.At, st.Source)
	}
	require.Equal(t, 1, scenes, "seed %d, %s: slow-start scenes", s.Seed, d)
}
