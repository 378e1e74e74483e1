package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/pgproxy"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// The worker side of the soak (issue 40): route changes rolled out the way
// the chart does it, events slow past their slice of a group's time, and
// the promises they test: no event applied by an older route set after a
// newer one began, no attempt charged to an event for another event's
// fault, the request id in every handler line, and no event of a paused
// source begun after the worker saw the pause.

const (
	stepRollout   stepKind = "rollout"   // start the workers of the next route set beside the running ones
	stepRetire    stepKind = "retire"    // stop the older route set's workers (SIGTERM), the newer take over
	stepCutOff    stepKind = "cutoff"    // the running route set's workers lose PostgreSQL (their proxy cut), just before a rollout
	stepReconnect stepKind = "reconnect" // once the newer set works their queue, the mark scene (soak_mark_test.go): the cut set's proxy opens again first
)

// cutEvery: every cutEvery-th rollout, from the second, is a cut
// handover (addWorkerSteps), or the first after it that keeps clear of the
// queue move. The cut route set's workers run through a pgproxy of their
// own from their start, and so do the newer set's, which the mark scene
// cuts off in turn (soak_mark_test.go).
const cutEvery = 4

// The lines a cut handover's old workers log (pkg/worker's rollout.go):
// each finds the newer set working its queue when it reaches PostgreSQL
// again, drains, and goes idle.
const (
	foundNewerWorking = "this worker's routes record expired (the database was out of reach), and a worker with other " +
		"routes works its queue since: this worker stops working"
	unfencedLine = "unfenced: this worker's routes record was renewed; it begins events again"
	retiredLine  = "idle: a newer route set took over this worker's queues; it works nothing (not ready) until it is stopped"
	// deleteRetryLine is what a worker's Stop logs when its first delete
	// of its routes record failed; it tries again for 5 seconds.
	deleteRetryLine = "could not delete this worker's routes record; trying again"
	// workerStarted is pkg/daemon's line once the worker's first claim
	// committed, working or waiting.
	workerStarted = `"msg":"worker started"`
)

// soakWorkerMaxConns is the workers' database.max_conns: riverConnsDefault
// (4) are kept for River and the worker's own bookkeeping, so 3 event
// transactions are open at once at most (soakEventTxs), fewer than the 8
// jobs (workerConcurrency) a worker runs: the pause promise's bound is
// below what a worker that checks the pause only when a job starts lets
// through.
const (
	soakWorkerMaxConns = 7
	soakEventTxs       = soakWorkerMaxConns - 4
)

// soakTail bounds the quiet tail: how long after the schedule every event
// must be done or failed. It is a bound, not a grace on a race: what can
// still be running then is a killed worker's jobs, which wait for
// rescue_after and the dead leader's lease (reaperWindow, 90 s), events
// whose attempt failed (a terminated backend, a flaky handler), which
// River retries after its backoff (1 s, then 16 s), and a sequenced key's
// events behind them. Slow events each have an account of their own, so
// none queues past job_timeout on one row (when 16 did, their backoff of
// 81 s on a sequenced key held the key for more than 3 minutes). The
// passing runs measured needed 83 s (seed 1, 40 s) and 153 s (seed 2,
// 2 minutes); five minutes is twice the longest.
const soakTail = 5 * time.Minute

// groupSlowPrefix names the accounts whose deposits sleep groupSlowSleep in
// their handler (soakWorkerTrigger): each its own account, so that they do
// not wait for one another's locks, and together more than a job's time in
// one group.
const (
	groupSlowPrefix = "acc_gslow_"
	groupSlowSleep  = 4 * time.Second
)

// hangPrefix names the accounts whose deposits hang in their handler, past
// job_timeout, until their own time is up, when their run begins within
// hangWithin of their receipt (soakWorkerTrigger sleeps hangSleep), and
// are quick in any later run (a rerun, or a run that waited: a scene holds
// the workers' transactions for one job's time, not more): events that
// hold the worker's event transactions until their deadline, so that the
// quick events fetched behind them get one with little of their own time
// left (see addHangScenes).
//
// The events behind them are on accounts of their own (waitPrefix) whose
// deposits take waitSleep in their handler, half a grouped event's slice:
// quick, never slow past a slice or a job, but longer than what is left of
// their time when they get a transaction, so that a worker that begins
// them anyway has them run out of it. (The ledger's three statements alone
// take a few milliseconds: that window is the chance seed 788135 met.)
//
// Their type is hangType, which the workers route to the ledger with a
// lock on the account (each its own): a route with an option runs each
// event in a transaction of its own as soon as its job starts, not in a
// group, so that they hold the transactions from their first second.
const (
	hangPrefix = "acc_hang_"
	hangSleep  = soakJobTimeout + 5*time.Second
	hangWithin = 5 * time.Second
	hangType   = "account.deposit.hang"
	waitPrefix = "acc_wait_"
	waitSleep  = soakJobTimeout / 20
)

// blockPrefix names the accounts whose deposits take blockSleep in their
// handler, and slicePrefix those whose deposits take sliceSleep, nine
// tenths of a grouped event's slice (the job's time divided by ten): see
// addBlockScenes. Neither is slow: a block event runs alone (hangType's
// route), within its job's time; a slice event within its slice.
const (
	blockPrefix = "acc_block_"
	blockSleep  = soakJobTimeout * 42 / 100
	slicePrefix = "acc_slice_"
	sliceSleep  = soakJobTimeout * 9 / 100
)

// flakyPrefix names the accounts whose deposits fail their first attempt
// (soakWorkerTrigger raises an error while the row's attempts, counted by
// the take, are below 2) and succeed at their second: handlers that fail
// then recover.
const flakyPrefix = "acc_flaky_"

// soakWorkerTrigger records, beside soakTrigger's soak_applied, which
// route set applied each event (its workers' application_name, see
// routeSetConfig) and every failure recorded on an inbox row (the
// attempts it was charged, why, and whether it failed the event).
var soakWorkerTrigger = fmt.Sprintf(`
ALTER TABLE soak_applied ADD COLUMN app text NOT NULL DEFAULT current_setting('application_name');
CREATE FUNCTION soak_gslow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.account_id LIKE '%s%%' THEN
        PERFORM pg_sleep(%d);
    END IF;
    IF NEW.account_id LIKE '%s%%' AND (SELECT attempts FROM webhook_inbox WHERE source = NEW.source AND event_id = NEW.event_id) < 2 THEN
        RAISE EXCEPTION 'soak: a flaky handler fails its first attempt';
    END IF;
    IF NEW.account_id LIKE '%s%%' AND (SELECT attempts FROM webhook_inbox WHERE source = NEW.source AND event_id = NEW.event_id) < 3 THEN
        RAISE EXCEPTION 'soak: a stray fails its first two attempts';
    END IF;
    IF NEW.account_id LIKE '%s%%' AND (SELECT received_at FROM webhook_inbox WHERE source = NEW.source AND event_id = NEW.event_id) > now() - interval '%d seconds' THEN
        PERFORM pg_sleep(%d);
    END IF;
    IF NEW.account_id LIKE '%s%%' THEN
        PERFORM pg_sleep(%g);
    END IF;
    IF NEW.account_id LIKE '%s%%' THEN
        PERFORM pg_sleep(%g);
    END IF;
    IF NEW.account_id LIKE '%s%%' THEN
        PERFORM pg_sleep(%g);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_gslow BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION soak_gslow();
CREATE TABLE soak_failures (source text NOT NULL, event_id text NOT NULL, attempts int NOT NULL, error text NOT NULL, final bool NOT NULL);
CREATE FUNCTION soak_failed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO soak_failures VALUES (NEW.source, NEW.event_id, NEW.attempts, NEW.last_error, NEW.status = 'failed');
    RETURN NEW;
END $$;
CREATE TRIGGER soak_failed AFTER UPDATE ON webhook_inbox FOR EACH ROW
    WHEN (NEW.last_error IS NOT NULL AND (NEW.last_error IS DISTINCT FROM OLD.last_error OR NEW.attempts <> OLD.attempts))
    EXECUTE FUNCTION soak_failed();`, groupSlowPrefix, int(groupSlowSleep.Seconds()), flakyPrefix, strayPrefix, hangPrefix, int(hangWithin.Seconds()), int(hangSleep.Seconds()), waitPrefix, waitSleep.Seconds(),
	blockPrefix, blockSleep.Seconds(), slicePrefix, sliceSleep.Seconds())

// soakWorkers is the worker side's state in a soak.
type soakWorkers struct {
	dbURL string
	gen   int                 // the newest route set started
	next  []*proctest.Process // its workers, while the older set still runs
	// proxy is the pgproxy of the route set a cut handover will cut off,
	// from its rollout until its retirement; cut holds that set's workers
	// from the cut on. A queue move or a restart meanwhile puts workers of
	// the newest set in their places, which the handover does not wait
	// for.
	proxy *pgproxy.Proxy
	cut   []*proctest.Process
	// newer is the pgproxy of the newer route set of a cut handover, from
	// its rollout on: the mark scene cuts it off in turn.
	newer *pgproxy.Proxy
	// stopped is how long the mark scenes held the schedule's clock: the
	// steps after a scene keep their spacing, instead of running at once,
	// bunched, when it ends (a scene takes 20 to 50 s on a busy machine).
	stopped time.Duration
	// handovers counts the cut handovers' old workers that found the newer
	// set working their queue.
	handovers int
	// cutRetires counts the cut handovers' retirements, and
	// stopsThroughCut their workers that deleted their routes record once
	// their proxy opened again (stopThroughCut).
	cutRetires, stopsThroughCut int
	// slowStart is the application_name of the worker whose start the
	// first mark scene slowed past River's bound (soakSlowStart).
	slowStart string
	// lostDatabase is the lost-database scene's figures
	// (checkAttemptsCounted).
	lostDatabase string
}

// shopRouteOptions are the shop route's options in route set gen: none,
// then a sequence, then a lock, in turn. Each change is one a worker must
// roll out (the route description names it): plain to sequenced changes the
// sequence alone, lock to plain the lock alone.
func shopRouteOptions(gen int) string {
	return []string{"", ", sequence: {key: data.account_id, order: data.v}", ", lock: {key: data.account_id}"}[gen%3]
}

// routeSetConfig writes the workers' config of route set gen: both
// sources' routes with the log handler beside the ledger (its "event" line
// carries the request id), the shop route with shopRouteOptions(gen), the
// hang scenes' route (hangType), the traffic sources' routes, and a
// database URL whose application_name names the set (soak_applied.app).
func (s *soak) routeSetConfig(dbURL string, gen int) string {
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	path := setup{DB: fmt.Sprintf("%s%sapplication_name=soak_routes_%d", dbURL, sep, gen), Job: soakJobTimeout,
		Worker: soakWorkerKeys + s.out.workerKeys(), MaxConns: soakWorkerMaxConns, Handlers: "ledger, log", Sources: s.shopSource() + trafficSources(),
		Route: soakRouteDestinations,
		Routes: fmt.Sprintf("    - {source: %s, types: [%q], handlers: [ledger, log]%s%s}\n    - {source: %s, types: [%q], handlers: [ledger, log], lock: {key: data.account_id}%s}",
			soakSources[1], faults.DepositType, shopRouteOptions(gen), soakRouteDestinations, soakSources[0], hangType, soakRouteDestinations) + trafficRoutes("ledger, log", soakRouteDestinations),
	}.write(s.t)
	s.onCurrentQueue(path)
	return path
}

// doWorker runs a step of the worker side.
func (s *soak) doWorker(ctx context.Context, st *step) {
	switch st.Kind {
	case stepRollout:
		s.awaitClaims(ctx)
		s.w.gen = st.Index
		db := s.w.dbURL
		if slices.ContainsFunc(s.sched.Steps, func(c step) bool { return c.Kind == stepCutOff && c.Index == st.Index }) {
			s.w.proxy, db = pgproxy.New(s.t, db)
			s.w.proxy.Open()
		}
		if slices.ContainsFunc(s.sched.Steps, func(c step) bool { return c.Kind == stepCutOff && c.Index == st.Index-1 }) {
			s.w.newer, db = pgproxy.New(s.t, db)
			s.w.newer.Open()
		}
		config := s.routeSetConfig(db, st.Index)
		for range soakProcesses {
			p, _ := startWorker(s.t, config)
			s.w.next = append(s.w.next, p)
			s.all = append(s.all, p)
		}
		s.worker = config
	case stepCutOff:
		s.awaitClaims(ctx)
		s.w.proxy.Cut()
		s.w.cut = slices.Clone(s.procs[workerRole])
	case stepReconnect:
		s.reconnect(ctx)
	case stepRetire:
		if s.w.cut != nil {
			proxy := s.w.proxy
			s.awaitHandover()
			s.stopThroughCut(proxy)
		}
		for _, p := range s.procs[workerRole] {
			// One the schedule killed, and has not restarted yet, is gone
			// already; its restart starts a worker of the newest set.
			if !p.Exited() {
				p.Stop(s.t)
			}
		}
		s.procs[workerRole], s.w.next = s.w.next, nil
	default:
		panic("soak: unknown step " + string(st.Kind))
	}
}

// awaitClaims waits until each running worker has claimed its queues (it
// logged "worker started") or exited, before a rollout or a cut: "newer"
// is by the first claim (docs/deploying.md), so a worker of the running
// set restarted just before a rollout, whose claim lands after the newer
// set's (it starts while PostgreSQL restarts, or behind a proxy the cut
// closes at once), is the newest route set: the newer set hands the queue
// back to it, as a rollback would. Seed 202 (30 minutes) met it as "a
// worker of the cut set never went idle": the schedule's restart ran
// late, next to the cut (seed 303 failed the same way, and seed 101's "the
// rollout went backwards" fits it; neither was traced). The wait holds
// the schedule's clock.
func (s *soak) awaitClaims(ctx context.Context) {
	began := time.Now()
	defer func() { s.w.stopped += time.Since(began) }()
	for _, p := range s.procs[workerRole] {
		s.pollUntil(ctx, "a worker (pid %d) neither started nor exited before a rollout or a cut", func(context.Context) (bool, error) {
			return claimedOrExited(p), nil
		}, p.PID())
	}
}

// claimedOrExited reports whether p's first routes claim committed (it
// logged workerStarted) or p has exited.
func claimedOrExited(p *proctest.Process) bool {
	return p.Exited() || strings.Contains(p.Log(), workerStarted)
}

// cutHandoverQuiet is how much later than a plain rollout's a cut
// handover's retirement is planned: its waits run the steps after it late
// anyway, and no kill is drawn in between.
const cutHandoverQuiet = 10 * time.Second

// cutHandoverWait bounds each wait of a cut handover: for the newer set to
// work the cut set's queue (the cut set's records expire three heartbeats
// after their last renewal), and for the cut set's workers to find it and
// go idle once reconnected: a drain may take worker.soft_stop_timeout
// (20 s) and the hard stop's 10 s, more on a busy machine.
const cutHandoverWait = 2 * time.Minute

// awaitHandover waits until each of the cut set's workers that worked its
// queue and still runs has gone idle, having found the newer set working
// it (what checkFenceKept reads), and counts those that said so. One that
// never worked (it was still waiting for an older set when the proxy was
// cut) waits on, and is stopped with the others; one a queue move
// replaced (seed 720966: a move 3 s into the cut put two workers of the
// newer set in the cut set's places, and the handover waited for them to
// retire) or the schedule killed has exited.
func (s *soak) awaitHandover() {
	for _, p := range s.w.cut {
		s.awaitWorker(p, func() bool { return !workedQueue(p) || strings.Contains(p.Log(), retiredLine) },
			fmt.Sprintf("cut handover: a worker of the cut set (pid %d) never went idle", p.PID()))
		if strings.Contains(p.Log(), foundNewerWorking) {
			s.w.handovers++
		}
	}
	s.w.cut, s.w.proxy, s.w.newer = nil, nil, nil
}

// awaitWorker polls until done holds or p has exited, cutHandoverWait at
// most; past it, p prints its goroutines (SIGQUIT: its output, below the
// verdict, says where it stands) and the run fails with what.
func (s *soak) awaitWorker(p *proctest.Process, done func() bool, what string) {
	for began := time.Now(); !p.Exited() && !done(); {
		if time.Since(began) > cutHandoverWait {
			_ = syscall.Kill(p.PID(), syscall.SIGQUIT)
			p.Wait(s.t)
			s.failNow(what)
		}
		<-time.After(50 * time.Millisecond) // polling a condition with a deadline
	}
}

// stopThroughCut stops a cut handover's route set, once it went idle, with
// its proxy cut again: each of its workers' Stop finds PostgreSQL out of
// reach when it deletes its routes record, says so (deleteRetryLine), and
// must delete it once the proxy opens, within its 5 seconds, and exit 0. A
// Stop that gave up at once (mutant stop-gives-up-on-the-record) exited 1
// and left the record to expire: the route set after it would wait out
// its ttl. The soak used to meet that only when a PostgreSQL restart fell
// on a retirement. Workers not behind the proxy (ones a restart put in
// the cut set's places run the newest set's config) stop as usual.
func (s *soak) stopThroughCut(proxy *pgproxy.Proxy) {
	proxy.Cut()
	var stopping []*proctest.Process
	for _, p := range s.procs[workerRole] {
		if !p.Exited() {
			require.NoError(s.t, syscall.Kill(p.PID(), syscall.SIGTERM))
			stopping = append(stopping, p)
		}
	}
	for _, p := range stopping {
		s.awaitWorker(p, func() bool { return strings.Contains(p.Log(), deleteRetryLine) },
			fmt.Sprintf("a worker of the cut set (pid %d) neither exited nor tried to delete its routes record after SIGTERM", p.PID()))
	}
	proxy.Open()
	s.w.cutRetires++
	for _, p := range stopping {
		if strings.Contains(p.Log(), deleteRetryLine) {
			s.w.stopsThroughCut++
		}
		if code := p.Wait(s.t); code != 0 {
			s.failNow(fmt.Sprintf("a worker (pid %d) stopped while its proxy was cut exited %d, not 0: "+
				"its routes record is left to expire", p.PID(), code))
		}
	}
}

// addWorkerSteps adds the worker side's steps to s, from a generator of
// their own (the rest of the schedule draws the same for a seed whatever
// they are): a route change rolled out about every 15 s (the next set's
// workers started beside the running ones, which drain; 3 to 6 s later the
// old ones stopped), with no SIGKILL of a worker from 2 s before a rollout
// to 2 s after its retirement (a killed worker's record would hold the new
// set back for three heartbeats); and, on the first source, now and then a
// send of events slow past their slice of a group's time mixed with quick
// ones and flaky ones (flakyPrefix).
func addWorkerSteps(s *schedule) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x3040))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	end := s.Duration - 2*time.Second
	type window struct{ from, to time.Duration }
	var quiet []window
	// A queue move starts workers of the newest set in the running set's
	// places: during a cut handover it would end the cut set's workers
	// before they could find the newer set working (seed 572739), so a cut
	// due then passes to the next rollout clear of it.
	move := time.Duration(-1)
	for _, st := range s.Steps {
		if st.Kind == stepMove {
			move = st.At
		}
	}
	gen, cutDue := 0, false
	for at := between(4*time.Second, 8*time.Second); at+8*time.Second < end; at += thinned(at, between(8*time.Second, 14*time.Second)) {
		gen++
		retire := at + between(3*time.Second, 6*time.Second)
		what := strings.TrimPrefix(shopRouteOptions(gen), ", ")
		if what == "" {
			what = "no options"
		}
		cutDue = cutDue || gen%cutEvery == 2
		cut := cutDue && (move < at-2*time.Second || move > retire+cutHandoverQuiet+2*time.Second)
		if cut {
			cutDue = false
			// A cut handover: the running set loses PostgreSQL just before
			// the rollout, and is reconnected once the newer set works its
			// queue; the retirement waits for it to find so and go idle.
			// Kills stay away from its longer retirement.
			s.Steps = append(s.Steps, step{At: at, Kind: stepCutOff, Index: gen - 1})
			retire += cutHandoverQuiet
		}
		s.Steps = append(s.Steps, step{At: at, Kind: stepRollout, Index: gen, Source: soakSources[1], What: what})
		if cut {
			s.Steps = append(s.Steps, step{At: at, Kind: stepReconnect, Index: gen - 1})
		}
		s.Steps = append(s.Steps, step{At: retire, Kind: stepRetire, Index: gen - 1})
		quiet = append(quiet, window{at - 2*time.Second, retire + 2*time.Second})
		at = retire
	}
	// Drop each worker kill, with its restart, that meets a rollout.
	var killed []int
	for i, st := range s.Steps {
		if st.Kind != stepKill || st.Role != workerRole {
			continue
		}
		j := slices.IndexFunc(s.Steps[i+1:], func(r step) bool {
			return r.Kind == stepRestart && r.Role == workerRole && r.Index == st.Index && r.At >= st.At
		})
		if j < 0 {
			panic("soak: a worker kill without its restart")
		}
		j += i + 1
		for _, w := range quiet {
			if st.At < w.to && s.Steps[j].At > w.from {
				killed = append(killed, i, j)
				break
			}
		}
	}
	for _, i := range slices.Backward(slices.Sorted(slices.Values(killed))) {
		s.Steps = slices.Delete(s.Steps, i, i+1)
	}
	n := 0
	for at := between(2*time.Second, 6*time.Second); at < end-3*time.Second; at += thinned(at, between(6*time.Second, 12*time.Second)) {
		ds := make([]faults.Deposit, 0, 2*workerConcurrency)
		for i := range 2 * workerConcurrency {
			account := fmt.Sprintf("acc_%d", rng.IntN(soakAccount))
			switch i % 4 {
			case 0, 2:
				account = fmt.Sprintf("%s%d", groupSlowPrefix, n)
			case 1:
				account = fmt.Sprintf("%s%d", flakyPrefix, n)
			}
			ds = append(ds, faults.Deposit{ID: fmt.Sprintf("%s_g%05d", soakSources[0], n), Account: account, Cents: int64(100 + rng.IntN(10000))})
			n++
		}
		s.Steps = append(s.Steps, step{At: at, Kind: stepSend, Source: soakSources[0], What: "gslow", Copies: 1, Deposits: ds})
	}
	addHangScenes(s)
	addBlockScenes(s)
	addLostDatabaseScene(s)
	addSlowStartScene(s)
}

// addBlockScenes adds to s, from a generator of its own, a block scene 20
// to 30 s into the schedule and then every 50 to 90 s, on the first
// source: as many events as addHangScenes sends that hold the workers'
// event transactions, but for blockSleep, four tenths of their time
// (blockPrefix, hangType: each alone), then 0 to 300 ms later a worker's
// jobs' worth of grouped events (slicePrefix). Those fetched beside the
// block events wait for a transaction, and their group gets one with
// about six tenths of their time left: less than half of it and a slice,
// so it takes none of them and they are worked alone, with time to spare.
// A group that took them anyway (mutant group-slice-cut-by-half-mark)
// would have its second event cut at the half mark by its context before
// statement_timeout, which closes the group's connection: the events
// before it are rolled back and worked again (checkGroupsKept).
func addBlockScenes(s *schedule) {
	rng := rand.New(rand.NewPCG(s.Seed, 0xb10c))
	end := s.Duration - 2*time.Second
	n := 0
	deposits := func(count int, prefix string) []faults.Deposit {
		ds := make([]faults.Deposit, count)
		for i := range ds {
			ds[i] = faults.Deposit{ID: fmt.Sprintf("%s_b%05d", soakSources[0], n), Account: fmt.Sprintf("%s%d", prefix, n), Cents: int64(100 + rng.IntN(10000))}
			n++
		}
		return ds
	}
	for at := 20*time.Second + time.Duration(rng.Int64N(int64(10*time.Second))); at < end-3*time.Second; at += thinned(at, 50*time.Second+time.Duration(rng.Int64N(int64(40*time.Second)))) {
		block := deposits((soakProcesses-1)*workerConcurrency+soakEventTxs, blockPrefix)
		for i := range block {
			block[i].Type = hangType
		}
		s.Steps = append(s.Steps, step{At: at, Kind: stepSend, Source: soakSources[0], What: "block", Copies: 1, Deposits: block},
			step{At: at + time.Duration(rng.Int64N(int64(300*time.Millisecond))), Kind: stepSend, Source: soakSources[0], What: "new", Copies: 1,
				Deposits: deposits(workerConcurrency, slicePrefix)})
	}
}

// addHangScenes adds to s, from a generator of its own, a hang scene 8 to
// 16 s into the schedule and then every 60 to 120 s (each holds the
// workers' event transactions for a job's time: more often, the 30-minute
// soak's workers fell behind its traffic), on the first source: events that hang at their first attempt
// until their time is up (hangPrefix), then 200 to 700 ms later events that
// take waitSleep (waitPrefix). There are as many hanging events as fill all
// but one worker's jobs and the last one's event transactions: however
// River's fetches share them out between two workers, each holds at least
// soakEventTxs of them in its event transactions and has the rest of its
// jobs free. The waiting events fetched into those jobs share a deadline a
// little later than the hanging ones', wait for a transaction, and get one
// as the hanging events' time runs out, with the delay between the two
// sends left of their own time, less than they need: the first to begin
// takes what the ones behind them have left. So the promise that no
// attempt is charged to an event for another event's fault (checkCharged)
// is tested by construction, not by the chance of a group ending at a slow
// event (the soak's seed 788135 found it so). (Sent in one fetch, they
// would share the hanging events' deadline, and have nothing left: put back
// uncharged even by a worker that checks nothing.) During a rollout, with
// four workers, the scene is weaker.
func addHangScenes(s *schedule) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x4a6e))
	end := s.Duration - 2*time.Second
	deposits := func(n *int, count int, account func(n int) string) []faults.Deposit {
		ds := make([]faults.Deposit, count)
		for i := range ds {
			ds[i] = faults.Deposit{ID: fmt.Sprintf("%s_h%05d", soakSources[0], *n), Account: account(*n), Cents: int64(100 + rng.IntN(10000))}
			*n++
		}
		return ds
	}
	n := 0
	for at := 8*time.Second + time.Duration(rng.Int64N(int64(8*time.Second))); at < end-3*time.Second; at += thinned(at, time.Minute+time.Duration(rng.Int64N(int64(time.Minute)))) {
		hang := deposits(&n, (soakProcesses-1)*workerConcurrency+soakEventTxs, func(n int) string { return fmt.Sprintf("%s%d", hangPrefix, n) })
		for i := range hang {
			hang[i].Type = hangType
		}
		quick := deposits(&n, workerConcurrency, func(n int) string { return fmt.Sprintf("%s%d", waitPrefix, n) })
		s.Steps = append(s.Steps, step{At: at, Kind: stepSend, Source: soakSources[0], What: "hang", Copies: 1, Deposits: hang},
			step{At: at + 200*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond))), Kind: stepSend, Source: soakSources[0], What: "new", Copies: 1, Deposits: quick})
	}
}

// workerOracle checks the worker side's promises, after soakOracle's first
// four, and returns the first broken one, or "":
//   - no event of a paused source begun after a worker saw the pause
//     (checkPausesSeen);
//   - no event applied by a route set after a newer one applied its first
//     (checkRouteSets);
//   - no worker unfenced after it found a newer set working its queue
//     (checkFenceKept);
//   - no failure recorded on an event that is neither poison nor slow for
//     running out of time: a slow neighbour's time is not its fault
//     (checkCharged);
//   - every handler line carries its event's request id (checkRequestIDs);
//   - no group transaction lost to an event cut within its slice
//     (checkGroupsKept);
//   - River counts an attempt exactly when the row does: no run that
//     failed for want of the database counted on either side
//     (checkAttemptsCounted, the lost-database scene).
func (s *soak) workerOracle(ctx context.Context) string {
	for _, check := range []func(context.Context) string{s.checkPausesSeen, s.checkRouteSets, s.checkFenceKept, s.checkCharged, s.checkRequestIDs, s.checkGroupsKept,
		s.checkAttemptsCounted} {
		if broken := check(ctx); broken != "" {
			return broken
		}
	}
	return ""
}

// logLine is what the oracle reads of a process's JSON log line.
type logLine struct {
	Msg       string `json:"msg"`
	Source    string `json:"source"`
	EventID   string `json:"event_id"`
	RequestID string `json:"request_id"`
	Error     string `json:"error"`
	Events    int    `json:"events"`
}

// eachLogLine calls fn with every JSON line of every process's log, in
// order per process, until fn returns a non-empty string, which it returns.
func (s *soak) eachLogLine(fn func(proc int, l *logLine) string) string {
	for i, p := range s.all {
		sc := bufio.NewScanner(strings.NewReader(p.Log()))
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if broken := fn(i, &l); broken != "" {
				return broken
			}
		}
	}
	return ""
}

// checkPausesSeen holds by construction, with no clock but the
// database's: a worker logs "source paused" once its view has the pause
// (pkg/worker's pauseWatch), and checks the pause right before an event's
// handlers, inside the event's transaction, where a paused event is held
// unless the database says the source was resumed meanwhile. So the
// handler lines ("event", the log handler's) of a paused source that
// follow the "source paused" line in one worker's log, before its "source
// resumed", and whose event began (soak_applied, the database's clock)
// while the source was paused in the database (a pauseWindow: from its
// paused_at to before inboxctl resume ran), are of events that had passed
// their check before the line: one per event transaction open then,
// soakEventTxs at most.
func (s *soak) checkPausesSeen(ctx context.Context) string {
	rows, err := s.pool.Query(ctx, `SELECT source || '/' || event_id, min(began_at) FROM soak_applied GROUP BY 1`)
	require.NoError(s.t, err)
	began := map[string]time.Time{}
	for rows.Next() {
		var key string
		var at time.Time
		require.NoError(s.t, rows.Scan(&key, &at))
		began[key] = at
	}
	require.NoError(s.t, rows.Err())
	inPause := func(source string, at time.Time) bool {
		return slices.ContainsFunc(s.pauses, func(w pauseWindow) bool {
			return w.source == source && !at.Before(w.from) && at.Before(w.resumed)
		})
	}
	var paused map[string]int // source → its events begun in a pause since the worker saw it
	last := -1
	return s.eachLogLine(func(proc int, l *logLine) string {
		if proc != last {
			last, paused = proc, map[string]int{}
		}
		switch l.Msg {
		case "source paused: its events are held":
			paused[l.Source] = 0
		case "source resumed":
			delete(paused, l.Source)
		case "event":
			n, ok := paused[l.Source]
			at, applied := began[l.Source+"/"+l.EventID]
			if !ok || !applied || !inPause(l.Source, at) {
				return ""
			}
			paused[l.Source] = n + 1
			if n+1 > soakEventTxs {
				return fmt.Sprintf("event %s/%s began in process %d after that worker saw its source paused, before the resume: %d events so far, at most %d (one per open event transaction) may have passed their check before",
					l.Source, l.EventID, proc, n+1, soakEventTxs)
			}
		}
		return ""
	})
}

// checkRouteSets: of two route sets, every event the older one applied
// began before the first the newer one applied (soak_applied.app). A
// newer set's workers wait until the older set's have drained and deleted
// their records, so this holds by construction, whatever the timing.
func (s *soak) checkRouteSets(ctx context.Context) string {
	var source, eventID, app, newer string
	var began, first time.Time
	err := s.pool.QueryRow(ctx, `
WITH sets AS (
    SELECT substring(app FROM 'soak_routes_([0-9]+)')::int AS gen, source, event_id, app, began_at FROM soak_applied
), firsts AS (
    SELECT gen, min(began_at) AS first, min(app) AS app FROM sets GROUP BY gen
)
SELECT s.source, s.event_id, s.app, s.began_at, f.app, f.first
FROM sets AS s JOIN firsts AS f ON f.gen > s.gen AND s.began_at > f.first
ORDER BY s.began_at LIMIT 1`).Scan(&source, &eventID, &app, &began, &newer, &first)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	require.NoError(s.t, err)
	return fmt.Sprintf("event %s/%s applied by route set %s %s after the newer %s applied its first event",
		source, eventID, app, began.Sub(first).Round(time.Millisecond), newer)
}

// checkFenceKept: a worker that found, on reaching PostgreSQL again, a
// newer route set working its queue (its records expired meanwhile) never
// unfences itself after: it drains, and the jobs it fetched are snoozed,
// not begun beside the newer set's. checkRouteSets sees a breach only if
// such a job began in the moments before the drain stopped it (the
// 30-minute soak's seed 202 did, once, under load); this reads the fence
// itself, at each of the worker's renewals. The cut handovers make the
// path; when they ran, some worker must have taken it.
func (s *soak) checkFenceKept(context.Context) string {
	found, last := false, -1
	broken := s.eachLogLine(func(proc int, l *logLine) string {
		if proc != last {
			last, found = proc, false
		}
		switch l.Msg {
		case foundNewerWorking:
			found = true
		case unfencedLine:
			if found {
				return fmt.Sprintf("process %d unfenced itself after it found a newer route set working its queue: "+
					"the jobs it fetched may begin beside the newer set's", proc)
			}
		}
		return ""
	})
	if broken == "" && s.w.handovers == 0 && slices.ContainsFunc(s.sched.Steps, func(st step) bool { return st.Kind == stepCutOff }) {
		return "no worker of a cut handover found the newer route set working its queue: the fence promise checked nothing"
	}
	if broken == "" && s.w.cutRetires > 0 && s.w.stopsThroughCut == 0 {
		return "no worker of a cut handover's retirement found its proxy cut when it deleted its routes record: stopThroughCut checked nothing"
	}
	return broken
}

// timedOut matches a failure for running out of time.
var timedOut = regexp.MustCompile(`deadline exceeded|statement timeout|canceling statement`)

// checkCharged: no failure recorded on an event whose handler needs less
// than its job's time (all but the hang scenes' first attempts), on its
// row or in its jobs' errors (River's count of its attempts, which
// checkAttemptsCounted holds to the row's), says it ran out of time. A quick event that shared a group, a connection or a
// lock queue with a slow one is never charged for it: it is worked alone,
// or snoozed uncharged when its time ran out before its handlers began;
// and a slow one (slowAccount's, groupSlowPrefix's: 3 and 4 s of the
// job's 10) that a group handed over with what it left, or that waited
// for a transaction, and then ran out, is snoozed uncharged and runs again
// alone with all of its time.
func (s *soak) checkCharged(ctx context.Context) string {
	rows, err := s.pool.Query(ctx, `SELECT f.source, f.event_id, f.attempts, f.error FROM (
  SELECT source, event_id, attempts, error FROM soak_failures
  UNION ALL
  SELECT i.source, i.event_id, (e->>'attempt')::int, e->>'error'
  FROM river_job AS j CROSS JOIN LATERAL unnest(j.errors) AS e
  JOIN webhook_inbox AS i ON i.id = (j.args->>'inbox_id')::bigint
  WHERE j.kind = 'hookinbox.event') AS f
JOIN ledger_entries AS e ON e.source = f.source AND e.event_id = f.event_id
WHERE e.account_id NOT LIKE $1 ORDER BY f.source, f.event_id`, hangPrefix+"%")
	require.NoError(s.t, err)
	defer rows.Close()
	for rows.Next() {
		var source, eventID, reason string
		var attempts int
		require.NoError(s.t, rows.Scan(&source, &eventID, &attempts, &reason))
		if timedOut.MatchString(reason) {
			return fmt.Sprintf("event %s/%s (not hanging) charged attempt %d for running out of time: %s", source, eventID, attempts, reason)
		}
	}
	require.NoError(s.t, rows.Err())
	return ""
}

// groupLost matches the error of a group transaction an event's failure
// broke (pkg/worker's workGroup): how long the event ran, its slice, and
// the handlers' error.
var groupLost = regexp.MustCompile(`event \d+ ran ([0-9.]+[µnm]?s) of its ([0-9.]+[µnm]?s) slice and failed \((.*)\)`)

// groupLockTimedOut is PostgreSQL's error for a statement the group's own
// lock_timeout ended: the statement was not cut by its context, and the
// group rolls back to the event's savepoint and goes on, unless its
// connection is gone by then. The 30-minute soaks (seeds 202 and 303)
// saw that once each: a fault of the schedule dropped the connection
// under the rollback ("rollback to savepoint: conn closed"), which the
// group survives by working its events again; it is not a group that
// took an event it had no time for.
const groupLockTimedOut = "canceling statement due to lock timeout"

// checkGroupsKept: no group transaction is lost to one of its events
// running out of time within its slice. A group takes an event only while
// the whole of its slice, and the margin statement_timeout needs to cancel
// first, ends before the half of the job's time the events worked alone
// keep: an event slow past its slice is cancelled by statement_timeout,
// rolled back to its savepoint, and the group commits the events before
// it. Only a statement cut by its context, which closes the connection,
// breaks the group; past the slice that is a machine too busy for
// statement_timeout to fire first, within it a group that took an event
// it had no time left for, and the events before it are worked twice.
func (s *soak) checkGroupsKept(context.Context) string {
	return s.eachLogLine(func(proc int, l *logLine) string {
		m := groupLost.FindStringSubmatch(l.Error)
		if l.Msg != "group transaction failed; working its events one by one" || m == nil || !timedOut.MatchString(m[3]) ||
			strings.Contains(m[3], groupLockTimedOut) {
			return ""
		}
		ran, err := time.ParseDuration(m[1])
		require.NoError(s.t, err)
		slice, err := time.ParseDuration(m[2])
		require.NoError(s.t, err)
		if ran >= slice {
			return ""
		}
		return fmt.Sprintf("process %d lost a group transaction of %d events to an event its context cut after %s of its %s slice: %s", proc, l.Events, ran, slice, l.Error)
	})
}

// checkRequestIDs: every handler line ("event") names the request id its
// event was received with, in a group or alone.
func (s *soak) checkRequestIDs(ctx context.Context) string {
	rows, err := s.pool.Query(ctx, `SELECT source || '/' || event_id, coalesce(request_id, '') FROM webhook_inbox`)
	require.NoError(s.t, err)
	want := map[string]string{}
	for rows.Next() {
		var key, id string
		require.NoError(s.t, rows.Scan(&key, &id))
		want[key] = id
	}
	require.NoError(s.t, rows.Err())
	lines := 0
	broken := s.eachLogLine(func(proc int, l *logLine) string {
		if l.Msg != "event" {
			return ""
		}
		lines++
		key := l.Source + "/" + l.EventID
		if w := want[key]; l.RequestID == "" || l.RequestID != w {
			return fmt.Sprintf("handler line of %s in process %d has request id %q, its row %q", key, proc, l.RequestID, w)
		}
		return ""
	})
	if broken == "" && lines == 0 {
		return "no handler line in any worker's log: the request-id promise checked nothing"
	}
	return broken
}

// TestSoakScheduleWorkerSide checks, without a database, what the worker
// side's steps promise the soak: the same seed draws the same schedule,
// every rollout's old set is retired after it, no worker is killed or
// restarted from 2 s before a rollout to 2 s after its retirement, and a
// two-minute schedule has a cut handover: its old set cut off right
// before its rollout, reconnected right after it. (It checks the
// lost-mark scene's place too: checkLostMarkScene.)
func TestSoakScheduleWorkerSide(t *testing.T) {
	t.Parallel()
	holds := 0
	for seed := range uint64(40) {
		for _, d := range []time.Duration{45 * time.Second, 2 * time.Minute} {
			s := newSchedule(seed, d)
			require.Equal(t, s.String(), newSchedule(seed, d).String(), "seed %d", seed)
			rollouts, cuts := 0, 0
			for i, st := range s.Steps {
				if st.Kind == stepHoldPause {
					// The long Resume: no PostgreSQL restart while the pause
					// is held (a restart ends the waits it makes).
					holds++
					end := st.At + time.Duration(st.Picks[0])*time.Millisecond
					for _, o := range s.Steps {
						require.False(t, o.Kind == stepPGRestart && o.At >= st.At && o.At <= end, "seed %d: %s during %s", seed, &o, &st)
					}
				}
				if st.Kind == stepCutOff {
					cuts++
					require.Equal(t, stepRollout, s.Steps[i+1].Kind, "seed %d: %s", seed, &st)
					require.Equal(t, st.Index+1, s.Steps[i+1].Index, "seed %d: %s", seed, &st)
					require.Equal(t, stepReconnect, s.Steps[i+2].Kind, "seed %d: %s", seed, &st)
				}
				if st.Kind != stepRollout {
					continue
				}
				rollouts++
				r := slices.IndexFunc(s.Steps[i:], func(o step) bool { return o.Kind == stepRetire && o.Index == st.Index-1 })
				require.GreaterOrEqual(t, r, 0, "seed %d: rollout %d never retires its old set", seed, st.Index)
				from, to := st.At-2*time.Second, s.Steps[i+r].At+2*time.Second
				for _, o := range s.Steps {
					if (o.Kind == stepKill || o.Kind == stepRestart) && o.Role == workerRole {
						require.False(t, o.At >= from && o.At <= to, "seed %d: %s during rollout %d", seed, &o, st.Index)
					}
				}
			}
			require.Positive(t, rollouts, "seed %d, %s: no rollout", seed, d)
			checkLostMarkScene(t, s, d)
			scenes := 0
			for _, st := range s.Steps {
				if st.Kind == stepSend && st.What == "lostdb" {
					scenes++
					require.Less(t, st.At, d/2+5*time.Second, "seed %d, %s: the lost-database scene", seed, d)
				}
			}
			require.Equal(t, 1, scenes, "seed %d, %s: lost-database scenes", seed, d)
			checkSlowStartScene(t, s, d)
			if d >= 2*time.Minute {
				require.Positive(t, cuts, "seed %d, %s: no cut handover", seed, d)
			}
		}
	}
	// 73 of 80 at the scene's start: the others had no room clear of the
	// sources' pauses.
	require.Greater(t, holds, 70, "schedules with a long Resume, of 80")
	for seed := range uint64(5) {
		checkLostMarkScene(t, newSchedule(seed, 30*time.Minute), 30*time.Minute)
	}
}

// checkLostMarkScene checks the lost-mark scene's place in s, a schedule
// d long: once, after a PostgreSQL restart (the reaper looks for lost
// commits only after it sees one), in the last 4 minutes (the orphan pass
// comes after the tail).
func checkLostMarkScene(t *testing.T, s *schedule, d time.Duration) {
	t.Helper()
	lost := slices.IndexFunc(s.Steps, func(o step) bool { return o.Kind == stepLostMarks })
	restart := slices.IndexFunc(s.Steps, func(o step) bool { return o.Kind == stepPGRestart })
	require.True(t, lost > restart && restart >= 0, "seed %d, %s: the lost-mark scene is not after a PostgreSQL restart", s.Seed, d)
	require.GreaterOrEqual(t, s.Steps[lost].At, d-4*time.Minute, "seed %d, %s: the lost-mark scene", s.Seed, d)
	require.Equal(t, -1, slices.IndexFunc(s.Steps[lost+1:], func(o step) bool { return o.Kind == stepLostMarks }), "seed %d, %s: two lost-mark scenes", s.Seed, d)
}
