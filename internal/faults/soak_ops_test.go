package faults_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/retention"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// The storage and operator steps of the soak (issue 40): PostgreSQL
// immediate restarts of the soak's own cluster (its database at
// synchronous_commit = off, as managed-PostgreSQL users set it), a pool
// starved by long transactions, a source moved to another queue, a purge
// of events whose jobs then run while their source is paused (and while a
// long Resume holds the pause past a job's time), inboxctl
// prune under a retention inside the provider's redelivery window, and a
// retention pass on a worker clock hours ahead.
const (
	stepPGRestart stepKind = "pgrestart"  // completions slowed, Deposits sent (and acknowledged), then pg_ctl stop -m immediate at once, then start
	stepStarve    stepKind = "starve"     // long transactions lock every account for Picks[0] ms
	stepMove      stepKind = "move"       // the shop source moves from soakQueueA to soakQueueB
	stepPurge     stepKind = "purge"      // inboxctl events purge of Deposits
	stepPrune     stepKind = "prune"      // inboxctl prune under a retention inside the redelivery window
	stepSkewPrune stepKind = "skewprune"  // a retention pass with a clock Picks[0] hours ahead
	stepReplay    stepKind = "replay"     // inboxctl replay SOURCE EVENT_ID of each of Deposits (done by then)
	stepBulk      stepKind = "bulkreplay" // a bulk replay of the poison events, cancelled at once
	stepGarbled   stepKind = "garbled"    // authentic deliveries whose body is not JSON, ids Deposits'
	stepRotate    stepKind = "rotate"     // the shop source's secret rotated through its secrets file
	stepHoldPause stepKind = "holdpause"  // Source's pause row locked for Picks[0] ms, as a long Resume's first batch holds it
	stepStrays    stepKind = "strays"     // after the move: Deposits claimed with their jobs on soakQueueA, each beside an older job with one attempt left
	stepLostMarks stepKind = "lostmarks"  // Deposits sent, each run's commit then lost as a crash loses it while River's completer holds its completion
)

// soakNewSecret is the shop source's secret after the rotation.
const soakNewSecret = "whsec_cm90YXRlZHNob3BzZWNyZXRyb3RhdGVkc2hvcA=="

// soakPoisonError is what the ledger's last_error says of a poison event;
// soakGarbledBody is an unparseable delivery's body.
const (
	soakPoisonError = "account_id is missing"
	soakGarbledBody = "deposit: not JSON at all"
)

// The shop source's queues before and after the move; the bank source
// stays on River's default queue.
const (
	soakQueueA = "shop_a"
	soakQueueB = "shop_b"
)

// soakOrphanAfter is the workers' orphan_after, past a short schedule and
// the quiet tail together, so that only the lost-commit rule and the
// dead-queue rule can heal a row within the run. At the product's default,
// 5 minutes, as long as the tail, the orphan pass healed a lost done mark
// just inside the tail once the reaper no longer waited behind a backlog,
// and mutant lost-done-mark-waits-orphan-pass passed (seed 1, 40 s).
const soakOrphanAfter = "orphan_after: 10m"

// soakShortRetention is the retention of `inboxctl prune`'s mistaken
// config, far inside Standard Webhooks' redelivery window.
const soakShortRetention = "2s"

// soakSlowCompletions makes River's completion of a job (its running row
// set completed) wait 300 ms, once per transaction, while
// soak_slow_completions says so: a loaded server's slow completions, which
// the restarts' bursts turn on, so that the completer holds completions of
// jobs whose asynchronous commits the crash then loses.
const soakSlowCompletions = `
CREATE TABLE soak_slow_completions (until timestamptz NOT NULL);
INSERT INTO soak_slow_completions VALUES ('-infinity');
CREATE FUNCTION soak_slow_completion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state = 'running' AND NEW.state = 'completed' AND current_setting('soak.slowed', true) IS DISTINCT FROM 'yes'
       AND clock_timestamp() < (SELECT until FROM soak_slow_completions) THEN
        PERFORM set_config('soak.slowed', 'yes', true);
        PERFORM pg_sleep(0.3);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_slow_completion BEFORE UPDATE ON river_job FOR EACH ROW EXECUTE FUNCTION soak_slow_completion();`

// soakOps is what the storage and operator steps need and note.
type soakOps struct {
	cluster *cluster
	url     string

	mu     sync.Mutex
	purged map[string]map[string]purgedRow // source → event id → the row right after its purge
	// crashes are when PostgreSQL was stopped immediately, by the
	// database's clock (pgRestartBy).
	crashes []time.Time
	broken  []string // promises seen broken while the schedule ran, in order
	moved   bool
	counts  map[stepKind]int
	// replayed counts the replays of an event that inboxctl answered as
	// done ("source/event id" → count): each adds one committed run.
	replayed map[string]int
	// garbled are the unparseable deliveries answered 2xx.
	garbled map[string][]string
	bulks   int
	// pauseWaiters is the most pause checks seen waiting behind a long
	// Resume at once (holdPause).
	pauseWaiters int
	// secretsFile holds the shop source's secrets; rotated is whether
	// senders sign shop's deliveries with soakNewSecret; signing counts
	// the sends in flight with the old secret.
	secretsFile string
	rotated     bool
	signing     sync.WaitGroup
	// lostMarks is what the lost-mark scene made, as checkLostMarks read it.
	lostMarks string
}

// soakCluster creates the soak's own PostgreSQL cluster (a restart must
// never touch the shared one), with asyncCommitConf (what an asynchronous
// commit leaves unflushed stays so until a crash), a database migrated
// for the ledger example at synchronous_commit = off. Its log names each
// line's application (a failed run prints the log's tail).
func soakCluster(s *soak) string {
	t := s.t
	c := newCluster(t, asyncCommitConf+"\nmax_connections = 100\nlog_line_prefix = '%m [%p] %q%a '")
	url := c.createDB(t, "soak")
	migrate(t, url)
	setAsyncCommit(t, url)
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), soakSlowCompletions+soakLostMarks+soakSlowStart+soakStartGate)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "shop.secrets")
	require.NoError(t, os.WriteFile(file, []byte(soakSecrets[1]+"\n"), 0o600))
	s.ops = &soakOps{cluster: c, url: url, secretsFile: file, purged: map[string]map[string]purgedRow{}, counts: map[stepKind]int{},
		replayed: map[string]int{}, garbled: map[string][]string{}}
	return url
}

// shopSource is the shop source's entry in the daemons' configs: its
// secrets in a secrets file, its queue soakQueueA.
func (s *soak) shopSource() string {
	return fmt.Sprintf("  - {name: %s, provider: standardwebhooks, secrets_file: %q, queue: %s}", soakSources[1], s.ops.secretsFile, soakQueueA)
}

// signer returns the secret a send to src signs with now, and the function
// the send calls when it ends.
func (s *soak) signer(src string) (string, func()) {
	o := s.ops
	o.mu.Lock()
	defer o.mu.Unlock()
	if src == soakSources[1] && o.rotated {
		return soakNewSecret, func() {}
	}
	if src == soakSources[1] {
		o.signing.Add(1)
		return soakSecrets[1], o.signing.Done
	}
	return soakSecrets[soakIndex(src)], func() {}
}

// soakQueues is the workers' queues before the move.
const soakQueues = "queues: [default, " + soakQueueA + "]"

// addOps adds the storage and operator steps to a schedule: two or three
// PostgreSQL restarts, a starvation, and once each the queue move, the
// purge scene, the mistaken prune and the skewed retention pass, each of
// the last two followed by late resends of events done by then. Scenes
// that pause keep clear of the schedule's pauses of the same source.
func (s *schedule) addOps(rng *rand.Rand, end time.Duration) {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	bank, shop := soakSources[0], soakSources[1]
	n := 0
	fresh := func(src string, count int, account string) []faults.Deposit {
		ds := make([]faults.Deposit, count)
		for i := range ds {
			acc := account
			if acc == "" {
				acc = fmt.Sprintf("acc_%d", rng.IntN(soakAccount))
			}
			// A version, for the route sets that sequence shop by data.v
			// (soak_worker_test.go): without it, such a route fails the
			// event for good.
			ds[i] = faults.Deposit{ID: fmt.Sprintf("%s_op%04d", src, n), Account: acc, Cents: int64(100 + rng.IntN(10000)), Version: int64(n + 1)}
			n++
		}
		return ds
	}
	// late returns up to count events of src sent before at-5s, not poison
	// nor slow: done by then unless a fault delayed them.
	late := func(src string, at time.Duration, count int) []faults.Deposit {
		var done []faults.Deposit
		for i := range s.Steps {
			st := &s.Steps[i]
			if st.Kind == stepSend && st.Source == src && st.At < at-5*time.Second && st.What != "poison" && st.What != "slow" && st.What != "purged" {
				done = append(done, st.Deposits...)
			}
		}
		var out []faults.Deposit
		for range min(count, len(done)) {
			out = append(out, done[rng.IntN(len(done))])
		}
		return out
	}
	var ops []step
	// PostgreSQL restarts, 8 s apart at least.
	for at := between(5*time.Second, 9*time.Second); at < end-6*time.Second; at += thinned(at, between(8*time.Second, 16*time.Second)) {
		ops = append(ops, step{At: at, Kind: stepPGRestart, Source: bank, Deposits: fresh(bank, 100, "")})
	}
	ops = append(ops, step{At: between(3*time.Second, end-5*time.Second), Kind: stepStarve, Picks: []uint64{uint64(1000 + rng.IntN(3000))}})
	// The queue move, a burst on the old queue just before it.
	move := between(end/3, 2*end/3)
	ops = append(ops, step{At: move - 300*time.Millisecond, Kind: stepSend, Source: shop, What: "new", Copies: 1, Deposits: fresh(shop, 40, "")},
		step{At: move, Kind: stepMove, Source: shop})
	// The purge scene: slow events fill the workers, fresh events wait
	// behind them and are purged, the source is paused before the slow
	// events end, so that the purged events' jobs run while it is paused.
	// It keeps clear of the schedule's pauses of its source.
	purgeSource, purgeAt := "", time.Duration(0)
	for _, src := range soakSources {
		at, ok := s.clearOfPauses(src, between(2*time.Second, end/3), end-10*time.Second, 6*time.Second)
		if !ok {
			continue
		}
		purged := fresh(src, 5, "")
		// Each slow event has an account of its own (acc_slow_0 …), so
		// that none queues past a job's time behind the others on one
		// account's row.
		slow := fresh(src, soakProcesses*workerConcurrency, slowAccount)
		for i := range slow {
			slow[i].Account = fmt.Sprintf("%s_%d", slowAccount, i)
		}
		ops = append(ops,
			step{At: at, Kind: stepSend, Source: src, What: "slow", Copies: 1, Deposits: slow},
			step{At: at + 100*time.Millisecond, Kind: stepSend, Source: src, What: "purged", Copies: 1, Deposits: purged},
			step{At: at + 600*time.Millisecond, Kind: stepPurge, Source: src, Deposits: purged},
			step{At: at + 900*time.Millisecond, Kind: stepPause, Source: src},
			step{At: at + between(4*time.Second, 5*time.Second), Kind: stepResume, Source: src})
		purgeSource, purgeAt = src, at
		break
	}
	// The long Resume scene: a source is paused, then its pause's row is
	// locked longer than a job's time (as a Resume enqueuing a large first
	// batch holds it), and the jobs of a burst sent just after check the
	// pause behind the lock until their time is up (a check that waited
	// out its job's time was charged an attempt). It takes bank when it
	// can (shop's pauses are the sequencing scenes', added later); it
	// keeps clear of the schedule's pauses of its source, and of the
	// purge scene's.
	holdPause := soakJobTimeout + 4*time.Second
	from := between(2*time.Second, end/4)
	for _, src := range []string{bank, shop} {
		lo := from
		if src == purgeSource {
			lo = max(lo, purgeAt+6*time.Second)
		}
		at, ok := s.clearOfPauses(src, lo, end-holdPause-4*time.Second, holdPause+3*time.Second)
		if !ok {
			continue
		}
		resume := at + 400*time.Millisecond + holdPause + time.Second
		ops = append(ops,
			step{At: at, Kind: stepPause, Source: src},
			step{At: at + 400*time.Millisecond, Kind: stepHoldPause, Source: src, Picks: []uint64{uint64(holdPause.Milliseconds())}},
			step{At: at + 600*time.Millisecond, Kind: stepSend, Source: src, What: "new", Copies: 1, Deposits: fresh(src, 10, "")},
			step{At: resume, Kind: stepResume, Source: src})
		// A PostgreSQL restart ends every wait behind the lock (its error
		// is charged, and River's backoff puts the job off): a wait as
		// long as a job's time needs none during the hold. A restart that
		// falls in it comes just after the Resume instead.
		for i := range ops {
			if ops[i].Kind == stepPGRestart && ops[i].At > at-time.Second && ops[i].At < resume {
				ops[i].At = resume + 500*time.Millisecond
			}
		}
		break
	}
	// The mistaken prune and the skewed retention pass, each followed by
	// late resends, which must stay duplicates.
	prune := between(end/2, end-4*time.Second)
	ops = append(ops, step{At: prune, Kind: stepPrune, Source: bank},
		step{At: prune + 500*time.Millisecond, Kind: stepSend, Source: bank, What: "late", Copies: 1, Deposits: late(bank, prune, 15)})
	skew := between(end/2, end-4*time.Second)
	hours := uint64(provider.RedeliveryWindow("standardwebhooks")/time.Hour) + 1 + rng.Uint64N(24)
	ops = append(ops, step{At: skew, Kind: stepSkewPrune, Picks: []uint64{hours}},
		step{At: skew + 500*time.Millisecond, Kind: stepSend, Source: shop, What: "late", Copies: 1, Deposits: late(shop, skew, 15)})
	// Replays of done events, one by one, a bulk replay of the poison
	// events cancelled at once, and unparseable deliveries.
	for range 2 {
		at := between(end/3, end-3*time.Second)
		ops = append(ops, step{At: at, Kind: stepReplay, Source: bank, Deposits: late(bank, at, 3)})
	}
	ops = append(ops, step{At: between(end/2, end-3*time.Second), Kind: stepBulk})
	for _, src := range soakSources {
		ops = append(ops, step{At: between(time.Second, end-3*time.Second), Kind: stepGarbled, Source: src, Deposits: fresh(src, 1+rng.IntN(3), "")})
	}
	ops = append(ops, step{At: between(3*time.Second, end/2), Kind: stepRotate, Source: shop})
	for i := range ops {
		if (ops[i].Kind == stepSend || ops[i].Kind == stepReplay) && len(ops[i].Deposits) == 0 {
			continue
		}
		s.Steps = append(s.Steps, ops[i])
	}
}

// strayPrefix names the stray scene's accounts, whose deposits fail while
// their row's attempts, counted by the take, are below 3
// (soakWorkerTrigger): their first two attempts.
const strayPrefix = "acc_stray_"

// addStrayScene adds the stray scene to s, from a generator of its own, 1
// to 3 s after the queue move: three events of the shop source, each on an
// account of its own.
func (s *schedule) addStrayScene() {
	i := slices.IndexFunc(s.Steps, func(st step) bool { return st.Kind == stepMove })
	if i < 0 {
		return
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x57a4))
	ds := sceneDeposits(rng, soakSources[1], "stray", strayPrefix)
	at := s.Steps[i].At + time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
	s.Steps = append(s.Steps, step{At: at, Kind: stepStrays, Source: soakSources[1], Deposits: ds})
}

// sceneDeposits returns a scene's three events of src, <src>_<tag>0 to 2,
// each on an account of its own (prefix and its index).
func sceneDeposits(rng *rand.Rand, src, tag, prefix string) []faults.Deposit {
	ds := make([]faults.Deposit, 3)
	for n := range ds {
		ds[n] = faults.Deposit{ID: fmt.Sprintf("%s_%s%d", src, tag, n), Account: fmt.Sprintf("%s%d", prefix, n),
			Cents: int64(100 + rng.IntN(10000)), Version: 1}
	}
	return ds
}

// strays plays the stray scene (mutant stray-moves-older-jobs-of-pending-rows):
// a receiver still on the config before the move claims the step's events
// with their jobs on soakQueueA, which no worker works since; and each
// gets an older job beside its newest, on soakQueueA too, with one attempt
// left, as River leaves one after a worker of the old queue was killed
// holding the event and a Resume on the old config enqueued it again (the
// soak is too short for River's backoff to spend 24 attempts: the scene
// writes them). The reaper must move the newest job alone, which fails
// twice (strayPrefix) and then succeeds; the older one, moved once the row
// is done, runs as a no-op. Had the older one moved too, one of its
// event's failures would be its last, and the event failed for good: only
// poison fails. The source is paused for the scene (the stray pass leaves
// a paused source's jobs where they are), so that no pass moves a newest
// job before its older one exists.
func (s *soak) strays(ctx context.Context, st *step) {
	if !s.ops.moved {
		s.failNow("stray scene: the queue move has not run: the old queue's workers would run the older jobs")
	}
	var paused bool
	require.NoError(s.t, s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hookinbox_source_pause WHERE source = $1)`, st.Source).Scan(&paused))
	if !paused {
		s.do(ctx, &step{Kind: stepPause, Source: st.Source})
	}
	rows := s.claimOnQueue(ctx, soakQueueA, st.Source, "soak-strays", st.Deposits)
	tag, err := s.pool.Exec(ctx, `
WITH older AS (
    UPDATE river_job SET state = 'retryable', attempt = max_attempts - 1, attempted_at = now() - interval '1 minute',
           scheduled_at = now() - interval '1 second'
    WHERE kind = $1 AND queue = $2 AND (args->>'inbox_id')::bigint = ANY($3)
    RETURNING args, kind, max_attempts, priority, queue
)
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state)
SELECT args, kind, max_attempts, priority, queue, 'available' FROM older`, inboxstore.JobKind, soakQueueA, rows)
	require.NoError(s.t, err)
	require.EqualValues(s.t, len(st.Deposits), tag.RowsAffected(), "stray scene: a newest job beside each older one")
	if !paused {
		s.do(ctx, &step{Kind: stepResume, Source: st.Source})
	}
}

// claimOnQueue claims the deposits of src as a receiver does, in one
// delivery, with their jobs on queue whatever src's queue is, notes them
// sent and acknowledged, and returns their rows' ids.
func (s *soak) claimOnQueue(ctx context.Context, queue, src, requestID string, deposits []faults.Deposit) []int64 {
	client, err := river.NewClient(riverpgxv5.New(s.pool), &river.Config{})
	require.NoError(s.t, err)
	ing := inboxstore.NewIngester(s.pool, client, &inboxstore.IngesterConfig{QueueFor: func(string) string { return queue }})
	d := &inboxstore.Delivery{Source: src, Provider: "standardwebhooks", Body: []byte(`{}`), RequestID: requestID}
	s.mu.Lock()
	for i := range deposits {
		dep := &deposits[i]
		d.Events = append(d.Events, inboxstore.IncomingEvent{ID: dep.ID, Type: cmp.Or(dep.Type, faults.DepositType), Payload: dep.Body()})
		s.sent[src][dep.ID] = *dep
	}
	s.mu.Unlock()
	res, err := ing.Ingest(ctx, d)
	require.NoError(s.t, err)
	require.Equal(s.t, len(deposits), res.New, "%s: its events are new", requestID)
	rows := make([]int64, 0, len(res.Claimed))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, row := range res.Claimed {
		s.acked[src][row.EventID] = true
		rows = append(rows, row.ID)
	}
	return rows
}

// lostMarkPrefix begins the accounts of the lost-mark scene's events: one
// each, so that the run after the lost one credits the same balance and
// writes the same message.
const lostMarkPrefix = "acc_lost_"

// soakLostMarks makes the lost-mark scene's case happen every time: a run
// whose asynchronous commit a crash loses while River's completer holds
// its job's completion, which it writes after the restart (the state the
// reaper's lost-commit rule heals: the row pending, its job completed). A
// crash finds that only by chance: any durable commit after the run (a
// claim, the relay's claim of the run's own messages) flushes it first.
// So the scene writes the crash's outcome instead, in River's completion
// of the job (soak_lose_mark, in the completer's transaction): the run's
// effects deleted (its ledger entry and credit, soak_applied's record,
// its outbox messages), its inbox row as the run found it. Only a run that
// found its row fresh (attempts 0) is lost, and only while no relay could
// have claimed its messages (a claim is durable: the run would be on
// disk); soak_hold_lost_mark keeps the relays off them for 3 minutes (a
// completion a cut or a kill leaves to River's rescuer comes later than a
// minute), and the messages are locked before they are read (a claim in
// flight is waited for, then seen). A target that is not lost says why in
// skipped, and its messages are released at once.
const soakLostMarks = `
CREATE TABLE soak_lost_marks (source text NOT NULL, event_id text NOT NULL, job_id bigint, lost_at timestamptz, skipped text,
    PRIMARY KEY (source, event_id));
CREATE FUNCTION soak_hold_lost_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM soak_lost_marks WHERE source = NEW.source AND event_id = NEW.event_id AND lost_at IS NULL AND skipped IS NULL) THEN
        NEW.next_attempt_at := now() + interval '3 minutes';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_hold_lost_mark BEFORE INSERT ON hookinbox_outbox FOR EACH ROW EXECUTE FUNCTION soak_hold_lost_mark();
CREATE FUNCTION soak_lose_mark() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r webhook_inbox;
    why text;
BEGIN
    IF OLD.state <> 'running' OR NEW.state <> 'completed' OR NEW.kind <> 'hookinbox.event' THEN
        RETURN NEW;
    END IF;
    SELECT * INTO r FROM webhook_inbox WHERE id = (NEW.args->>'inbox_id')::bigint;
    IF NOT FOUND OR r.status <> 'done' THEN
        RETURN NEW;
    END IF;
    PERFORM 1 FROM soak_lost_marks WHERE source = r.source AND event_id = r.event_id AND lost_at IS NULL AND skipped IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    IF r.attempts <> 1 THEN
        why := format('its run found it with %s failed attempts', r.attempts - 1);
    ELSIF EXISTS (SELECT 1 FROM (SELECT attempts, status, next_attempt_at FROM hookinbox_outbox WHERE source = r.source AND event_id = r.event_id FOR UPDATE) AS m
                  WHERE m.attempts > 0 OR m.status <> 'pending' OR m.next_attempt_at <= clock_timestamp()) THEN
        why := 'a relay could claim its messages (a claim makes the run durable)';
    END IF;
    IF why IS NOT NULL THEN
        UPDATE soak_lost_marks SET skipped = why WHERE source = r.source AND event_id = r.event_id;
        UPDATE hookinbox_outbox SET next_attempt_at = now() WHERE source = r.source AND event_id = r.event_id AND status = 'pending' AND attempts = 0;
        RETURN NEW;
    END IF;
    UPDATE ledger_accounts AS a SET balance = a.balance - e.amount FROM ledger_entries AS e
    WHERE e.source = r.source AND e.event_id = r.event_id AND a.account_id = e.account_id;
    DELETE FROM ledger_entries WHERE source = r.source AND event_id = r.event_id;
    DELETE FROM soak_applied WHERE source = r.source AND event_id = r.event_id;
    DELETE FROM hookinbox_outbox WHERE source = r.source AND event_id = r.event_id;
    UPDATE webhook_inbox SET status = 'pending', attempts = 0, processed_at = NULL WHERE id = r.id;
    UPDATE soak_lost_marks SET job_id = NEW.id, lost_at = clock_timestamp() WHERE source = r.source AND event_id = r.event_id;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_lose_mark BEFORE UPDATE ON river_job FOR EACH ROW EXECUTE FUNCTION soak_lose_mark();`

// addLostMarkScene adds the lost-mark scene to s, from a generator of its
// own, from a second after the schedule's first PostgreSQL restart (a
// commit is lost only in a crash, and the reaper looks for lost commits
// only for orphan_after after it sees a restarted server), and within the
// last 4 minutes (so that the orphan pass, 10 minutes after the events
// arrived, comes after the tail's 5: only the lost-commit rule heals them
// within the run), to 10 s before the end: three events of the bank
// source, each on an account of its own.
func (s *schedule) addLostMarkScene(end time.Duration) {
	i := slices.IndexFunc(s.Steps, func(st step) bool { return st.Kind == stepPGRestart })
	if i < 0 {
		return
	}
	from := max(s.Steps[i].At+time.Second, end-4*time.Minute)
	if from >= end-10*time.Second {
		return
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x105d))
	ds := sceneDeposits(rng, soakSources[0], "lost", lostMarkPrefix)
	at := from + time.Duration(rng.Int64N(int64(end-10*time.Second-from)))
	s.Steps = append(s.Steps, step{At: at, Kind: stepLostMarks, Source: soakSources[0], Deposits: ds})
}

// lostMarks plays the lost-mark scene (mutant lost-done-mark-waits-orphan-pass):
// the step's events become soak_lost_marks' targets, then are sent; each
// run's commit is then lost as soakLostMarks says. The reaper's lost-commit
// rule must run each again within the tail (the soak's orphan_after is
// past it), and the oracle then finds each applied once.
func (s *soak) lostMarks(ctx context.Context, st *step) {
	ids := make([]string, len(st.Deposits))
	for i, d := range st.Deposits {
		ids[i] = d.ID
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO soak_lost_marks (source, event_id) SELECT $1, unnest($2::text[])`, st.Source, ids)
	require.NoError(s.t, err)
	s.burst(ctx, st)
}

// checkLostMarks notes what the lost-mark scene made, and returns a broken
// promise of the soak's own when a scene lost no run: the scene would
// have checked nothing.
func (s *soak) checkLostMarks(ctx context.Context) string {
	rows, err := s.pool.Query(ctx, `SELECT source || '/' || event_id, lost_at IS NOT NULL, coalesce(skipped, 'never run to completion')
FROM soak_lost_marks ORDER BY 1`)
	require.NoError(s.t, err)
	var lost int
	var notes []string
	for rows.Next() {
		var key, why string
		var ok bool
		require.NoError(s.t, rows.Scan(&key, &ok, &why))
		if ok {
			lost++
		} else {
			notes = append(notes, key+": "+why)
		}
	}
	require.NoError(s.t, rows.Err())
	summary := fmt.Sprintf("%d lost done marks of %d", lost, lost+len(notes))
	if len(notes) > 0 {
		summary += " (" + strings.Join(notes, "; ") + ")"
	}
	s.ops.lostMarks = summary
	if lost == 0 && len(notes) > 0 {
		return "the lost-mark scene lost no run's commit, and so checked nothing: " + summary
	}
	return ""
}

// clearOfPauses returns a time from lo on, before hi, such that src has no
// pause of the schedule from half a second before it to span after it, and
// whether there is one.
func (s *schedule) clearOfPauses(src string, lo, hi, span time.Duration) (time.Duration, bool) {
	type window struct{ from, to time.Duration }
	var windows []window
	paused := time.Duration(-1)
	for i := range s.Steps {
		st := &s.Steps[i]
		switch {
		case st.Source != src:
		case st.Kind == stepPause:
			paused = st.At
		case st.Kind == stepResume && paused >= 0:
			windows = append(windows, window{paused, st.At})
			paused = -1
		}
	}
	for at := lo; at < hi; at += 250 * time.Millisecond {
		free := true
		for _, w := range windows {
			if w.from < at+span && w.to > at-500*time.Millisecond {
				free = false
			}
		}
		if free {
			return at, true
		}
	}
	return 0, false
}

// opString is how the schedule prints a storage or operator step.
func opString(st *step) string {
	switch st.Kind {
	case stepStarve:
		return fmt.Sprintf("every account locked for %d ms", st.Picks[0])
	case stepHoldPause:
		return fmt.Sprintf("%s: its pause locked for %d ms", st.Source, st.Picks[0])
	case stepMove:
		return fmt.Sprintf("%s: queue %s -> %s", st.Source, soakQueueA, soakQueueB)
	case stepPurge:
		return fmt.Sprintf("%s: %d events (%s …)", st.Source, len(st.Deposits), st.Deposits[0].ID)
	case stepPrune:
		return fmt.Sprintf("%s: retention %s (inside the redelivery window)", st.Source, soakShortRetention)
	case stepSkewPrune:
		return fmt.Sprintf("clock +%dh", st.Picks[0])
	case stepReplay, stepGarbled, stepPGRestart, stepStrays, stepLostMarks, stepSlowStart:
		return fmt.Sprintf("%s: %d events (%s …)", st.Source, len(st.Deposits), st.Deposits[0].ID)
	case stepFeedDown, stepFeedCrash:
		return outboxString(st)
	}
	return st.Source
}

// doOp runs a storage or operator step.
func (s *soak) doOp(ctx context.Context, st *step) {
	o := s.ops
	o.mu.Lock()
	o.counts[st.Kind]++
	o.mu.Unlock()
	switch st.Kind {
	case stepPGRestart:
		_, err := s.pool.Exec(ctx, `UPDATE soak_slow_completions SET until = clock_timestamp() + interval '10 seconds'`)
		require.NoError(s.t, err)
		s.burst(ctx, st)
		s.pgRestart(ctx)
		_, err = s.pool.Exec(ctx, `UPDATE soak_slow_completions SET until = '-infinity'`)
		require.NoError(s.t, err)
	case stepStarve:
		s.starve(time.Duration(st.Picks[0]) * time.Millisecond)
	case stepHoldPause:
		s.holdPause(st.Source, time.Duration(st.Picks[0])*time.Millisecond)
	case stepMove:
		s.move()
	case stepPurge:
		s.purge(ctx, st)
	case stepPrune:
		s.prune(ctx)
	case stepSkewPrune:
		s.skewPrune(ctx, time.Duration(st.Picks[0])*time.Hour)
	case stepReplay:
		s.replayOne(st)
	case stepBulk:
		s.bulkReplay()
	case stepGarbled:
		s.garbled(ctx, st)
	case stepRotate:
		s.rotate()
	case stepStrays:
		s.strays(ctx, st)
	case stepLostMarks:
		s.lostMarks(ctx, st)
	case stepSlowStart:
		s.slowStartScene(ctx, st)
	}
}

// breaks notes a broken promise.
func (o *soakOps) breaks(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.broken = append(o.broken, fmt.Sprintf(format, args...))
}

// burst delivers the step's events and waits for their answers, so that
// the workers are busy with them when the restart that follows comes: the
// asynchronous commits of their last transactions are then in no WAL on
// disk, and River's completer holds some of their completions in memory
// (it completes them after the restart: the done marks were lost).
func (s *soak) burst(ctx context.Context, st *step) {
	s.mu.Lock()
	for _, d := range st.Deposits {
		s.sent[st.Source][d.ID] = d
	}
	s.mu.Unlock()
	secret, signed := s.signer(st.Source)
	defer signed()
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rep := (&faults.Sender{Targets: s.urls[st.Source], Secret: secret, Workers: 8, Timeout: 5 * time.Second}).Run(bctx, st.Deposits)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range rep.Acks {
		s.acked[st.Source][a.ID] = true
	}
}

// pgRestart stops the cluster with pg_ctl stop -m immediate (a crash:
// what is not in the WAL on disk is gone) and starts it again; then every
// event acknowledged before the stop must still be in the inbox, received
// before the stop (not claimed anew by a resend since).
func (s *soak) pgRestart(ctx context.Context) {
	s.pgRestartBy(ctx, func() { s.ops.cluster.stop(s.t, "immediate") })
}

// pgRestartBy is pgRestart with crash, which returns once the server is
// down, in place of pg_ctl stop -m immediate.
func (s *soak) pgRestartBy(ctx context.Context, crash func()) {
	var before time.Time
	require.NoError(s.t, s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before))
	s.mu.Lock()
	acked := map[string][]string{}
	for src, ids := range s.acked {
		for id := range ids {
			acked[src] = append(acked[src], id)
		}
	}
	s.mu.Unlock()
	s.ops.mu.Lock()
	s.ops.crashes = append(s.ops.crashes, before)
	s.ops.mu.Unlock()
	crash()
	s.ops.cluster.start(s.t)
	s.pool.Reset()
	for src, ids := range acked {
		rows, err := s.pool.Query(ctx, `SELECT event_id FROM webhook_inbox WHERE source = $1 AND event_id = ANY($2) AND received_at <= $3`, src, ids, before)
		require.NoError(s.t, err)
		kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(s.t, err)
		if len(kept) < len(ids) {
			have := map[string]bool{}
			for _, id := range kept {
				have[id] = true
			}
			for _, id := range ids {
				if !have[id] {
					s.ops.breaks("acknowledged event %s/%s lost across a PostgreSQL immediate restart (%d of %d acknowledged lost)",
						src, id, len(ids)-len(kept), len(ids))
					break
				}
			}
		}
	}
}

// starve holds long transactions that lock every ledger account for d:
// the handlers wait on them, holding their pool's connections, and new
// events wait for a connection. Its errors (a restart or a terminated
// backend may end it) are the fault's, not the soak's.
func (s *soak) starve(d time.Duration) {
	s.sends.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
		defer cancel()
		_ = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM ledger_accounts ORDER BY account_id FOR UPDATE`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT pg_sleep($1)`, d.Seconds())
			return err
		})
	})
}

// holdPause locks source's pause row for d, as the transaction of a
// Resume enqueuing a large first batch does: the pause checks of the
// source's jobs wait behind it. A PostgreSQL restart or a terminated
// backend (the schedule's other faults) ends its transaction; it locks
// the row again at once, until d is over.
//
// It counts the most pause checks seen waiting behind it at once (the
// summary prints the largest count): none would mean the scene tested
// nothing.
func (s *soak) holdPause(source string, d time.Duration) {
	s.sends.Go(func() {
		end := time.Now().Add(d)
		ctx, cancel := context.WithDeadline(context.Background(), end.Add(30*time.Second))
		defer cancel()
		for time.Now().Before(end) {
			_ = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT 1 FROM hookinbox_source_pause WHERE source = $1 FOR UPDATE`, source); err != nil {
					return err
				}
				for time.Now().Before(end) {
					<-time.After(min(500*time.Millisecond, time.Until(end))) // samples, not a wait for a condition
					var waiting int
					if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%hookinbox_source_pause%FOR SHARE%'`).Scan(&waiting); err != nil {
						return err
					}
					s.ops.mu.Lock()
					s.ops.pauseWaiters = max(s.ops.pauseWaiters, waiting)
					s.ops.mu.Unlock()
				}
				return nil
			})
			if time.Now().Before(end) {
				<-time.After(100 * time.Millisecond) // PostgreSQL coming back: a pace, not a wait for a condition
			}
		}
	})
}

// move moves the shop source from soakQueueA to soakQueueB the way the
// docs describe it: every config says the new queue, the new workers start
// beside the old ones, then the old workers and the receivers go (a
// receiver restarts on the new config). A process the schedule has killed
// comes back on the new config at its restart.
func (s *soak) move() {
	s.ops.moved = true
	for _, path := range append(slices.Clone(s.configs), s.worker) {
		s.onCurrentQueue(path)
	}
	// The workers of a rollout in progress (soak_worker_test.go) too: they
	// run the newest config, s.worker.
	for _, ps := range [][]*proctest.Process{s.procs[workerRole], s.w.next} {
		for i, old := range ps {
			if old.Exited() {
				continue
			}
			p, _ := startWorker(s.t, s.worker)
			s.all = append(s.all, p)
			old.Kill(s.t)
			ps[i] = p
		}
	}
	for i, old := range s.procs[receiverRole] {
		if old.Exited() {
			continue
		}
		old.Kill(s.t)
		s.start(receiverRole, i)
	}
}

// onCurrentQueue rewrites the config at path for the shop source's queue
// once it moved (soakQueueB).
func (s *soak) onCurrentQueue(path string) {
	if !s.ops.moved {
		return
	}
	b, err := os.ReadFile(path)
	require.NoError(s.t, err)
	require.NoError(s.t, os.WriteFile(path, []byte(strings.ReplaceAll(string(b), soakQueueA, soakQueueB)), 0o600))
}

// purge runs inboxctl events purge on the step's events and notes those
// it erased, with their status (an event not yet claimed then is not
// purged, and runs as any other).
func (s *soak) purge(ctx context.Context, st *step) {
	args := []string{"events", "purge", "--source", st.Source, "--yes"}
	ids := make([]string, 0, len(st.Deposits))
	for _, d := range st.Deposits {
		ids = append(ids, d.ID)
	}
	s.ctl(append(args, ids...)...)
	rows, err := s.pool.Query(ctx, `SELECT event_id, status::text, clock_timestamp() FROM webhook_inbox
WHERE source = $1 AND event_id = ANY($2) AND erased_at IS NOT NULL`, st.Source, ids)
	require.NoError(s.t, err)
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	if s.ops.purged[st.Source] == nil {
		s.ops.purged[st.Source] = map[string]purgedRow{}
	}
	for rows.Next() {
		var id string
		var r purgedRow
		require.NoError(s.t, rows.Scan(&id, &r.status, &r.at))
		s.ops.purged[st.Source][id] = r
	}
	require.NoError(s.t, rows.Err())
}

// purgedRow is a purged event's row right after the purge: failed when it
// had not been done, done when it had (an erasure keeps a done row done),
// and when that was (the database's clock).
type purgedRow struct {
	status string
	at     time.Time
}

// prune runs inboxctl prune under a copy of the config whose bank source
// keeps done rows soakShortRetention, far inside Standard Webhooks'
// redelivery window: it must refuse, deleting nothing (the late resends
// that follow must stay duplicates).
func (s *soak) prune(ctx context.Context) {
	short := withBankKeys(s.t, s.configs[0], "retention: "+soakShortRetention)
	count := func() int {
		var n int
		require.NoError(s.t, s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE source = $1`, soakSources[0]).Scan(&n))
		return n
	}
	before := count()
	code, out := proctest.Run(s.t, command(s.inboxctl, "prune", "--config", short))
	s.ctlLogs = append(s.ctlLogs, out)
	if code == 0 {
		s.ops.breaks("inboxctl prune ran under a retention of %s, inside the redelivery window (inbox rows of %s: %d before, %d after): %s",
			soakShortRetention, soakSources[0], before, count(), strings.TrimSpace(out))
	}
}

// skewPrune runs the real pruner on the soak's database with the sources'
// shortest valid retention (the redelivery window) and a worker clock
// hours ahead, past the retention: it must delete nothing, the rows being
// minutes old by the database's clock.
func (s *soak) skewPrune(ctx context.Context, ahead time.Duration) {
	window := provider.RedeliveryWindow("standardwebhooks")
	policies := make([]retention.Policy, 0, len(soakSources))
	for _, src := range soakSources {
		policies = append(policies, retention.Policy{Source: src, Provider: "standardwebhooks", Retention: window})
	}
	pruner := retention.NewPruner(inboxstore.New(s.pool), &retention.Config{
		Policies: policies, Now: func() time.Time { return time.Now().Add(ahead) },
	})
	res, err := pruner.Run(ctx)
	require.NoError(s.t, err)
	for _, r := range res {
		if r.Deleted > 0 {
			s.ops.breaks("a retention pass with the worker's clock %s ahead deleted %d done rows of %s received minutes ago (retention %s)",
				ahead, r.Deleted, r.Source, window)
		}
	}
}

// replayOne replays each of the step's events with inboxctl replay SOURCE
// EVENT_ID; each that it replays must run once more (one still pending is
// refused, and counts nothing).
func (s *soak) replayOne(st *step) {
	for _, d := range st.Deposits {
		_, out := proctest.Run(s.t, command(s.inboxctl, "replay", st.Source, d.ID, "--config", s.configs[0]))
		s.ctlLogs = append(s.ctlLogs, out)
		if strings.Contains(out, fmt.Sprintf("replayed %s %s (row ", st.Source, d.ID)) {
			s.ops.mu.Lock()
			s.ops.replayed[st.Source+"/"+d.ID]++
			s.ops.mu.Unlock()
		}
	}
}

// bulkReplay starts a bulk replay of every source's poison events and
// cancels it at once (unless it has already ended): whatever it replayed
// fails again, and nothing is applied.
func (s *soak) bulkReplay() {
	code, out := proctest.Run(s.t, command(s.inboxctl, "replay", "--error", soakPoisonError, "--yes", "--config", s.configs[0]))
	s.ctlLogs = append(s.ctlLogs, out)
	m := bulkStarted.FindStringSubmatch(out)
	if code != 0 || m == nil {
		return // nothing to replay yet, or a terminated connection
	}
	// A run that ended before the cancel came is not running any more; a
	// cancel whose connection was terminated is tried again, twice.
	for range 3 {
		code, out := proctest.Run(s.t, command(s.inboxctl, "replay", "cancel", m[1], "--config", s.configs[0]))
		s.ctlLogs = append(s.ctlLogs, out)
		if code == 0 || strings.Contains(out, "the run is not running") {
			s.ops.mu.Lock()
			s.ops.bulks++
			s.ops.mu.Unlock()
			return
		}
	}
	require.Fail(s.t, "inboxctl replay cancel "+m[1]+" failed three times")
}

// bulkStarted is inboxctl's line for a bulk replay started.
var bulkStarted = regexp.MustCompile(`(?m)^replay (\d+) started: `)

// garbled delivers, signed, a body that is not JSON under each of the
// step's event ids: the receiver must answer 2xx, store the row failed
// with the reason, and enqueue no job.
func (s *soak) garbled(ctx context.Context, st *step) {
	secret, done := s.signer(st.Source)
	defer done()
	for n, d := range st.Deposits {
		req, err := webhook.NewRequest(ctx, s.urls[st.Source][n%len(s.urls[st.Source])], &webhook.Params{Provider: "standardwebhooks",
			Secret: secret, EventID: d.ID, EventType: faults.DepositType, Time: time.Now(), Body: []byte(soakGarbledBody)})
		require.NoError(s.t, err)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue // the receiver is down: never acknowledged
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			s.ops.mu.Lock()
			s.ops.garbled[st.Source] = append(s.ops.garbled[st.Source], d.ID)
			s.ops.mu.Unlock()
		}
	}
}

// rotate rotates the shop source's secret as docs/deploying.md says: the
// new secret is written beside the old one, first; once every running
// receiver has logged the reload, the provider (the soak's senders) signs
// with the new one; once every send signed with the old one has ended, the
// old one is removed from the file. The last write happens while the
// schedule goes on.
func (s *soak) rotate() {
	file := s.ops.secretsFile
	require.NoError(s.t, os.WriteFile(file, []byte(soakNewSecret+"\n"+soakSecrets[1]+"\n"), 0o600))
	for _, p := range s.procs[receiverRole] {
		if !p.Exited() {
			p.WaitLine(s.t, "secrets reloaded", `"secrets_after":2`)
		}
	}
	s.ops.mu.Lock()
	s.ops.rotated = true
	s.ops.mu.Unlock()
	s.sends.Go(func() {
		s.ops.signing.Wait()
		require.NoError(s.t, os.WriteFile(file, []byte(soakNewSecret+"\n"), 0o600))
	})
}

// replays returns how many times inboxctl replayed the event.
func (o *soakOps) replays(src, id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.replayed[src+"/"+id]
}

// isPurged reports whether the soak purged the event.
func (o *soakOps) isPurged(src, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.purged[src][id]
	return ok
}

// firstBroken is the first promise a step saw broken while the schedule
// ran (an acknowledged event lost across a restart, a prune inside the
// redelivery window, a pass on a skewed clock deleting young rows): the
// oracle reports it before anything it finds after the tail.
func (o *soakOps) firstBroken() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.broken) == 0 {
		return ""
	}
	return o.broken[0]
}

// checkOps is the storage and operator steps' promises, after the others:
//   - the rotated secret in no process's log;
//   - every unparseable delivery answered 2xx is stored failed with its
//     reason, without a job, and never applied;
//   - every purged event stays as its purge left it (failed, or done when
//     it was done by then) and erased, and never ran after its purge.
func (s *soak) checkOps(ctx context.Context) string {
	o := s.ops
	o.mu.Lock()
	defer o.mu.Unlock()
	if broken := s.checkLostMarks(ctx); broken != "" {
		return broken
	}
	for i, p := range s.all {
		for _, needle := range []string{soakNewSecret, strings.TrimPrefix(soakNewSecret, "whsec_")} {
			if strings.Contains(p.Log(), needle) {
				return fmt.Sprintf("the rotated secret in process %d's log", i)
			}
		}
	}
	for src, ids := range o.garbled {
		for _, id := range ids {
			var status, reason string
			var jobs, ran int
			err := s.pool.QueryRow(ctx, `SELECT status::text, coalesce(last_error, ''),
  (SELECT count(*) FROM river_job AS j WHERE j.kind = $3 AND (j.args->>'inbox_id')::bigint = i.id),
  (SELECT count(*) FROM soak_applied AS a WHERE a.source = i.source AND a.event_id = i.event_id)
FROM webhook_inbox AS i WHERE source = $1 AND event_id = $2`, src, id, inboxstore.JobKind).Scan(&status, &reason, &jobs, &ran)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Sprintf("unparseable delivery %s/%s answered 2xx is not in the inbox", src, id)
			}
			require.NoError(s.t, err)
			if status != "failed" || reason == "" || jobs != 0 || ran != 0 {
				return fmt.Sprintf("unparseable delivery %s/%s: status %s, last_error %q, %d jobs, applied %d times (want failed with the reason, no job, never)",
					src, id, status, reason, jobs, ran)
			}
		}
	}
	for src, ids := range o.purged {
		for id, r := range ids {
			var status string
			var erased bool
			var ran int
			err := s.pool.QueryRow(ctx, `SELECT status::text, erased_at IS NOT NULL,
  (SELECT count(*) FROM soak_applied AS a WHERE a.source = i.source AND a.event_id = i.event_id AND a.began_at > $3)
FROM webhook_inbox AS i WHERE source = $1 AND event_id = $2`, src, id, r.at).Scan(&status, &erased, &ran)
			require.NoError(s.t, err)
			if status != r.status || !erased || ran > 0 {
				return fmt.Sprintf("purged event %s/%s: status %s, erased %t, ran %d times after its purge (want %s as the purge left it, erased, never)",
					src, id, status, erased, ran, r.status)
			}
		}
	}
	return ""
}

// opsSummary is the storage and operator steps' figures.
func (s *soak) opsSummary() string {
	o := s.ops
	o.mu.Lock()
	defer o.mu.Unlock()
	purged := 0
	for _, ids := range o.purged {
		purged += len(ids)
	}
	garbled := 0
	for _, ids := range o.garbled {
		garbled += len(ids)
	}
	return fmt.Sprintf("%d PostgreSQL restarts, %d starvations, %d pause checks waiting behind a long Resume at most, queue moved %t, %d events purged, %d prunes refused, %d skewed passes, "+
		"%d replays of one event, %d bulk replays cancelled or ended, %d unparseable deliveries, secret rotated %t, %d stray scenes, %s",
		o.counts[stepPGRestart], o.counts[stepStarve], o.pauseWaiters, o.moved, purged, o.counts[stepPrune], o.counts[stepSkewPrune],
		len(o.replayed), o.bulks, garbled, o.rotated, o.counts[stepStrays], o.lostMarks)
}
