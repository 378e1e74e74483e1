package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// The lost-database scene (the 30-minute soak's seed 303, mutants
// lost-database-charged and unrecorded-failure-counted): runs that fail
// for want of the database are not the event's failures, and River must
// not count them either. The PostgreSQL restarts of a schedule break runs
// by chance; the scene does it by construction, once per schedule, on
// bank events each on an account of its own, worked alone (hangType's
// route): the first run of a cutPrefix event terminates its own backend
// (a failover under a running handler), and the first run of an
// unrecordedPrefix event fails while the database refuses to record that
// failure (as one gone a moment later would). Each then runs again, and
// must be done without a failure on its row or in its jobs' errors.
const (
	// crashWindow bounds how long before a crash a run began whose
	// failure's record the crash may have lost: the job's time, and
	// River's completer's retries after the restart.
	crashWindow      = soakJobTimeout + 50*time.Second
	cutPrefix        = "acc_cut_"
	unrecordedPrefix = "acc_unrec_"
	// unrecordedError is what an unrecordedPrefix event's first run fails
	// with, and what soak_refuse_record refuses to record.
	unrecordedError = "soak: a failure the database will not record"
	// rescuedError is River's error for a job its rescuer found stuck (its
	// worker was killed): River's count, which no code of ours sees.
	rescuedError = "Stuck job rescued by JobRescuer"
)

// soakLostDatabase is the scene's SQL: one sequence per target account
// (nextval is not rolled back with the run, so it tells a first run from
// the next), the handler's trigger, and the refusal of the record.
var soakLostDatabase = fmt.Sprintf(`
DO $$
BEGIN
    FOR n IN 0..2 LOOP
        EXECUTE format('CREATE SEQUENCE soak_first_%[1]s%%s', n);
        EXECUTE format('CREATE SEQUENCE soak_first_%[2]s%%s', n);
    END LOOP;
END $$;
CREATE FUNCTION soak_want_db() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.account_id LIKE '%[1]s%%' AND nextval(format('soak_first_%%s', NEW.account_id)) = 1 THEN
        PERFORM pg_terminate_backend(pg_backend_pid());
        PERFORM pg_sleep(5);
    END IF;
    IF NEW.account_id LIKE '%[2]s%%' AND nextval(format('soak_first_%%s', NEW.account_id)) = 1 THEN
        RAISE EXCEPTION '%[3]s';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_want_db BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION soak_want_db();
CREATE FUNCTION soak_refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'soak: the database refuses to record the failure';
END $$;
CREATE TRIGGER soak_refuse_record BEFORE UPDATE ON webhook_inbox FOR EACH ROW
    WHEN (NEW.last_error LIKE '%%%[3]s%%') EXECUTE FUNCTION soak_refuse_record();`, cutPrefix, unrecordedPrefix, unrecordedError)

// addLostDatabaseScene adds the scene to s, from a generator of its own,
// 5 s into the schedule up to its middle: three events of each kind, in
// one send.
func addLostDatabaseScene(s *schedule) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x10db))
	ds := append(sceneDeposits(rng, soakSources[0], "cut", cutPrefix), sceneDeposits(rng, soakSources[0], "unrec", unrecordedPrefix)...)
	for i := range ds {
		ds[i].Type = hangType
	}
	at := 5*time.Second + time.Duration(rng.Int64N(int64(max(s.Duration/2-5*time.Second, time.Second))))
	s.Steps = append(s.Steps, step{At: at, Kind: stepSend, Source: soakSources[0], What: "lostdb", Copies: 1, Deposits: ds})
}

// checkAttemptsCounted: River counts an attempt exactly when the row does.
// No job of an event holds more failed attempts (River's rescuer's aside)
// than its row was charged (soak_failures), but for a run a crash may have
// lost the record of: its failure recorded in an asynchronous commit (a
// group's, or any at the soak's synchronous_commit = off), acknowledged,
// then lost when PostgreSQL stopped before the WAL reached the disk, while
// River's completer wrote the error after the restart (the 30-minute soak,
// seed 303, at f34ef05: a flaky event River counted twice, its row once).
// Such a run began at most crashWindow before a crash. No event of the
// lost-database scene was charged at all, on its row or in River, crash or
// not. A scene none of whose first runs of a kind failed would have checked
// nothing: that fails too.
func (s *soak) checkAttemptsCounted(ctx context.Context) string {
	s.ops.mu.Lock()
	crashes := slices.Clone(s.ops.crashes)
	s.ops.mu.Unlock()
	var source, eventID, last string
	var counted, charged int
	err := s.pool.QueryRow(ctx, `
WITH r AS (
  SELECT (j.args->>'inbox_id')::bigint AS id, count(*) AS n,
         count(*) FILTER (WHERE EXISTS (SELECT 1 FROM unnest($3::timestamptz[]) AS c
                                        WHERE c > (e->>'at')::timestamptz AND c <= (e->>'at')::timestamptz + $4 * interval '1 second')) AS crashed,
         string_agg(DISTINCT left(e->>'error', 200), '; ') AS errors
  FROM river_job AS j CROSS JOIN LATERAL unnest(j.errors) AS e
  WHERE j.kind = $1 AND e->>'error' <> $2 GROUP BY 1
), f AS (
  SELECT source, event_id, count(*) AS n FROM soak_failures GROUP BY 1, 2
)
SELECT i.source, i.event_id, r.n, coalesce(f.n, 0), r.errors
FROM r JOIN webhook_inbox AS i ON i.id = r.id LEFT JOIN f ON f.source = i.source AND f.event_id = i.event_id
WHERE r.n - r.crashed > coalesce(f.n, 0) ORDER BY i.id LIMIT 1`, inboxstore.JobKind, rescuedError, crashes, crashWindow.Seconds()).Scan(&source, &eventID, &counted, &charged, &last)
	switch {
	case err == nil:
		return fmt.Sprintf("event %s/%s: River counted %d failed attempts, its row was charged %d: an attempt counted that the row never saw (%s)",
			source, eventID, counted, charged, last)
	case !errors.Is(err, pgx.ErrNoRows):
		require.NoError(s.t, err)
	}
	err = s.pool.QueryRow(ctx, `
SELECT a.account_id, (SELECT count(*) FROM river_job AS j CROSS JOIN LATERAL unnest(j.errors) AS e
                      WHERE j.kind = $3 AND (j.args->>'inbox_id')::bigint = i.id AND e->>'error' <> $4)
FROM ledger_entries AS a JOIN webhook_inbox AS i ON i.source = a.source AND i.event_id = a.event_id
WHERE a.account_id LIKE $1 OR a.account_id LIKE $2
ORDER BY 2 DESC, 1 LIMIT 1`, cutPrefix+"%", unrecordedPrefix+"%", inboxstore.JobKind, rescuedError).Scan(&eventID, &counted)
	switch {
	case err == nil && counted > 0:
		return fmt.Sprintf("lost-database scene: River counted %d failed attempts of the event on %s, which failed only for want of the database", counted, eventID)
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		require.NoError(s.t, err)
	}
	err = s.pool.QueryRow(ctx, `
SELECT a.account_id, (SELECT count(*) FROM soak_failures AS f WHERE f.source = a.source AND f.event_id = a.event_id), coalesce((
  SELECT string_agg(f.error, '; ') FROM soak_failures AS f WHERE f.source = a.source AND f.event_id = a.event_id), '')
FROM ledger_entries AS a
WHERE (a.account_id LIKE $1 OR a.account_id LIKE $2)
  AND EXISTS (SELECT 1 FROM soak_failures AS f WHERE f.source = a.source AND f.event_id = a.event_id)
ORDER BY 1 LIMIT 1`, cutPrefix+"%", unrecordedPrefix+"%").Scan(&eventID, &charged, &last)
	switch {
	case err == nil:
		return fmt.Sprintf("lost-database scene: the event on %s was charged %d attempts for want of the database: %s", eventID, charged, last)
	case !errors.Is(err, pgx.ErrNoRows):
		require.NoError(s.t, err)
	}
	var cuts, unrecorded int
	require.NoError(s.t, s.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE sequencename LIKE $1), count(*) FILTER (WHERE sequencename LIKE $2)
FROM pg_sequences WHERE last_value IS NOT NULL`, "soak_first_"+cutPrefix+"%", "soak_first_"+unrecordedPrefix+"%").Scan(&cuts, &unrecorded))
	s.w.lostDatabase = fmt.Sprintf("%d runs cut off and %d failures not recorded, none counted", cuts, unrecorded)
	if cuts == 0 || unrecorded == 0 {
		return "the lost-database scene failed no first run of a kind, and so checked nothing: " + s.w.lostDatabase
	}
	return ""
}
