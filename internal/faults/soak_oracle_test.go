package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// soakRow is an event as the oracle reads it.
type soakRow struct {
	status, lastError string
	applied           int // committed runs of its handler (soak_applied)
}

// oracle checks the soak's promises, in order, and returns the first
// broken one, or "" when all hold:
//  1. every event answered 2xx is in the inbox;
//  2. the worker side's promises (workerOracle, soak_worker_test.go): no
//     event of a paused source begun after a worker saw the pause, no event
//     applied by an older route set after a newer one began, no attempt
//     charged to an event for another's time, the request id in every
//     handler line (before the tail's bound: a worker that charges the
//     wrong events also leaves them pending for River's backoff); then
//     no reaper job held back by a backlog (checkReaperFirst);
//  3. nothing is pending after the quiet tail (soakTail);
//  4. every acknowledged event is done and its handler ran (committed)
//     exactly once, or, when the schedule made it poison, failed and never
//     applied; no stored event failed that was not poison, not even for
//     a while (a job left behind that ran it again after);
//  5. every account's balance is the sum of its entries;
//  6. no source's secret (whole, or its key after "whsec_") in any
//     process's log or inboxctl's output.
//
// Before them comes the first promise a storage or operator step saw
// broken while the schedule ran (soakOps.firstBroken); between 4 and 5,
// the batches', twins', sequencing scenes' and bulk replays' promises
// (checkTraffic); between 5 and 6, the steps' own promises (checkOps).
func (s *soak) oracle() string {
	ctx := context.Background()
	if broken := s.ops.firstBroken(); broken != "" {
		return broken
	}
	rows := s.readRows(ctx)
	failed := s.everFailed(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, src := range soakSources {
		for id := range s.acked[src] {
			if _, ok := rows[src+"/"+id]; !ok {
				return fmt.Sprintf("acknowledged event %s/%s is not in the inbox", src, id)
			}
		}
	}
	if broken := s.workerOracle(ctx); broken != "" {
		return broken
	}
	if broken := s.checkReaperFirst(ctx); broken != "" {
		return broken
	}
	if p := s.pending(); len(p) > 0 {
		return fmt.Sprintf("events still pending %s after the schedule: %v", soakTail, p)
	}
	for _, src := range soakSources {
		for id := range s.sent[src] {
			r, ok := rows[src+"/"+id]
			if !ok || s.ops.isPurged(src, id) {
				continue // never acknowledged (checked above) and never stored, or purged (checkOps)
			}
			poison := s.sched.Poison[src][id]
			switch {
			case poison && (r.status != "failed" || r.applied != 0):
				return fmt.Sprintf("poison event %s/%s: status %s, applied %d times (want failed, 0)", src, id, r.status, r.applied)
			case !poison && r.status != "done":
				return fmt.Sprintf("event %s/%s: status %s (%s), want done: only poison fails", src, id, r.status, r.lastError)
			case !poison && failed[src+"/"+id] != "":
				return fmt.Sprintf("event %s/%s was failed for good (%s), then ran again: only poison fails", src, id, failed[src+"/"+id])
			case !poison && r.applied != 1+s.ops.replays(src, id):
				return fmt.Sprintf("event %s/%s applied %d times, want exactly once and once more per replay (%d)", src, id, r.applied, s.ops.replays(src, id))
			}
		}
	}
	if broken := s.checkTraffic(ctx, rows); broken != "" {
		return broken
	}
	var bad []string
	brows, err := s.pool.Query(ctx, `SELECT account_id FROM ledger_accounts AS a
WHERE balance <> (SELECT coalesce(sum(amount), 0) FROM ledger_entries AS e WHERE e.account_id = a.account_id)`)
	require.NoError(s.t, err)
	bad, err = pgx.CollectRows(brows, pgx.RowTo[string])
	require.NoError(s.t, err)
	if len(bad) > 0 {
		return fmt.Sprintf("balances that are not the sum of their entries: %v", bad)
	}
	if broken := s.checkOps(ctx); broken != "" {
		return broken
	}
	if broken := s.checkOutbox(ctx); broken != "" {
		return broken
	}
	return s.checkSecrets()
}

// reaperBehind bounds how many event jobs River may fetch from the
// reaper's queue after a reaper job was enqueued and before it fetches
// that job. The reaper comes first (River priority 1, events 2): only the
// fetches that began before the reaper's insert committed, or raced its
// fetch for the row lock, take events first, each at most a worker's 8
// slots, and two workers fetch. Behind a backlog at one priority the
// count is the backlog (the soak's bursts leave hundreds).
const reaperBehind = 64

// checkReaperFirst is promise 2's last part (5b in docs/guarantees.md): a
// backlog of events does not hold back the reaper, which heals what an
// outage or a queue move left (see inboxstore.EventPriority). It reads
// River's records: for each reaper job, the event jobs on its queue
// fetched after it was enqueued and before it was fetched.
func (s *soak) checkReaperFirst(ctx context.Context) string {
	var id, behind int64
	var queue string
	err := s.pool.QueryRow(ctx, `
SELECT r.id, r.queue, (SELECT count(*) FROM river_job AS e
    WHERE e.kind = $1 AND e.queue = r.queue AND e.attempted_at > r.created_at AND e.attempted_at < r.attempted_at) AS behind
FROM river_job AS r WHERE r.kind = 'hookinbox.reaper' AND r.attempted_at IS NOT NULL
ORDER BY behind DESC LIMIT 1`, inboxstore.JobKind).Scan(&id, &queue, &behind)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	require.NoError(s.t, err)
	if behind > reaperBehind {
		return fmt.Sprintf("reaper job %d waited on queue %s while River fetched %d event jobs from it (at most %d): a backlog held the reaper back", id, queue, behind, reaperBehind)
	}
	return ""
}

// readRows returns the inbox's rows by "source/event_id", with the
// committed runs of their handler.
func (s *soak) readRows(ctx context.Context) map[string]*soakRow {
	rows, err := s.pool.Query(ctx, `SELECT i.source || '/' || i.event_id, i.status::text, coalesce(i.last_error, ''),
  (SELECT count(*) FROM soak_applied AS a WHERE a.source = i.source AND a.event_id = i.event_id)
FROM webhook_inbox AS i`)
	require.NoError(s.t, err)
	out := map[string]*soakRow{}
	for rows.Next() {
		var key string
		r := &soakRow{}
		require.NoError(s.t, rows.Scan(&key, &r.status, &r.lastError, &r.applied))
		out[key] = r
	}
	require.NoError(s.t, rows.Err())
	return out
}

// everFailed returns, by "source/event id", the first failure recorded on
// each event that failed it (soak_failures.final), done since or not: a
// failed event pages its operator, even when a job left behind runs it
// again later.
func (s *soak) everFailed(ctx context.Context) map[string]string {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (source, event_id) source || '/' || event_id, format('attempt %s: %s', attempts, error)
FROM soak_failures WHERE final ORDER BY source, event_id, attempts`)
	require.NoError(s.t, err)
	out := map[string]string{}
	for rows.Next() {
		var key, what string
		require.NoError(s.t, rows.Scan(&key, &what))
		out[key] = what
	}
	require.NoError(s.t, rows.Err())
	return out
}

// checkSecrets is promise 6.
func (s *soak) checkSecrets() string {
	texts := map[string]string{}
	for i, p := range s.all {
		texts[fmt.Sprintf("process %d's log", i)] = p.Log()
	}
	for i, out := range s.ctlLogs {
		texts[fmt.Sprintf("inboxctl run %d's output", i)] = out
	}
	for where, text := range texts {
		for _, sec := range soakSecrets {
			for _, needle := range []string{sec, strings.TrimPrefix(sec, "whsec_")} {
				if strings.Contains(text, needle) {
					return fmt.Sprintf("a source's secret in %s", where)
				}
			}
		}
	}
	return ""
}

// summary is a passed run's figures.
func (s *soak) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent, acked, poison := 0, 0, 0
	for _, src := range soakSources {
		sent += len(s.sent[src])
		acked += len(s.acked[src])
		poison += len(s.sched.Poison[src])
	}
	return fmt.Sprintf("%d events sent, %d acknowledged, %d poison, %d pauses, %d processes started, %d steps, %d workers found a newer set working after a cut, %d stopped through one; %s; %s; %s; %s",
		sent, acked, poison, len(s.pauses), len(s.all), len(s.sched.Steps), s.w.handovers, s.w.stopsThroughCut, s.w.lostDatabase, s.opsSummary(), s.trafficSummary(), s.outboxSummary())
}
