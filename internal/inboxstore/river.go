package inboxstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// This file is the adapter to River's schema: every statement of the
// product that reads or writes River's tables (river_job) or channels
// (river_insert) outside River lives here, each with the reason River's
// public API (Client.InsertTx, JobGet, JobList, QueueList, JobRetry,
// JobCancel, JobUpdate) does not serve. River may change its schema in any
// release without a compile error here: river_test.go runs each statement
// against a schema River's own migrations (rivermigrate) just built, and
// fails when River's shape moves under it. docs/design.md ("River's schema,
// touched in one place") lists them. The one touch that cannot live here is
// migration 0008's index on river_job (river_job_inbox_id_idx), which
// newestJob reads through; the contract test checks it too.

// RiverInsertTopic is the channel River's producers LISTEN on for inserted
// jobs (River's notifier.NotificationTopicInsert, an internal package),
// behind the client's schema: "<schema>.river_insert".
const RiverInsertTopic = "river_insert"

// NotifyInsertTx tells River's producers of queue, in every worker, that a
// job waits there, once tx commits: the payload River's own insert
// notification carries. schema is the River client's (Client.Schema; ""
// for the connection's current schema).
//
// Why not River: InsertTx notifies too, but at most once per fetch_cooldown
// per client and queue, and drops (does not defer) the notifications over
// that rate; River has no public way to notify a queue. A sequence key's
// woken event, inserted right after another insert on its queue, would
// then wait for a poll (worker.fetch_poll_interval, 1 s) instead of
// running at once.
func (s *Store) NotifyInsertTx(ctx context.Context, tx DBTX, schema, queue string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify(concat(coalesce(nullif($1, ''), current_schema()), '.', $2::text), json_build_object('queue', $3::text)::text)`,
		schema, RiverInsertTopic, queue)
	if err != nil {
		return fmt.Errorf("inbox: notify river insert: %w", err)
	}
	return nil
}

// SetJobMaxAttempts sets the max_attempts of River job jobID to
// maxAttempts, on db (a pool or the caller's transaction).
//
// Why not River: River has no public way to change an existing job's
// max_attempts (JobUpdateParams carries only Output). The worker owns the
// attempt policy (worker.max_attempts), while every enqueuer (the receiver,
// inboxctl's replay, Resume, the reaper) stamps a job from its own
// process's configuration; see pkg/worker's alignAttempts.
func (s *Store) SetJobMaxAttempts(ctx context.Context, db DBTX, jobID int64, maxAttempts int) error {
	if _, err := db.Exec(ctx, `UPDATE river_job SET max_attempts = $2 WHERE id = $1`, jobID, maxAttempts); err != nil {
		return fmt.Errorf("inbox: set job max_attempts: %w", err)
	}
	return nil
}

// newestJob is a lateral subquery that finds row i's newest River event job
// (a job's args carry its row's inbox_id) through river_job_inbox_id_idx,
// migration 0008's expression index on River's table. The row keeps no link
// of its own: writing one after River's insert cost the receiver an UPDATE
// per group (issue 11). River's GIN index on args would serve too, at about
// 6x the cost per row (measured on a 100k backlog). "id + 0" keeps the
// planner from walking river_job's primary key backwards instead. A job
// River has pruned is not found. Its columns are the adapter's: id, state
// (text), queue, last_error (the job's last recorded error) and
// finalized_at.
//
// Why not River: JobList (with Where) finds one row's jobs per call, while
// ListOrphans and the event lists join every row they return to its job
// in the statement that locks or pages the rows.
const newestJob = `
SELECT id, state::text AS state, queue, errors[array_length(errors, 1)]->>'error' AS last_error, finalized_at FROM river_job
WHERE kind = '` + JobKind + `' AND (args->>'inbox_id')::bigint = i.id
ORDER BY id + 0 DESC LIMIT 1`

// waitingJobs is a subquery of the event jobs that wait (available,
// retryable or scheduled) on the queues of the text[] parameter queues
// (say "$2"), with their id, state, queue and inbox_id: it drives
// ListOrphans' stray pass from the waiting jobs of the dead queues (River's
// fetching index), not from every pending row.
//
// Why not River: JobList would page every waiting job out to the process
// to feed a statement that locks the rows.
func waitingJobs(queues string) string {
	return `SELECT w.id, w.state, w.queue, (w.args->>'inbox_id')::bigint AS inbox_id FROM river_job AS w
               WHERE w.state IN ('available', 'retryable', 'scheduled') AND w.queue = ANY(` + queues + `::text[]) AND w.kind = '` + JobKind + `'`
}

// deadQueues returns the queues where jobs wait (available, retryable or
// scheduled) that are not live. It skips through River's fetching index,
// (state, queue, …), one probe per state and queue, whatever the number of
// waiting jobs.
//
// Why not River: QueueList lists the queues River's producers registered,
// not the queues where jobs wait (a queue whose workers are gone, or that
// no worker ever worked, is the case here); JobList would page every
// waiting job.
func (s *Store) deadQueues(ctx context.Context, db DBTX, live []string) ([]string, error) {
	rows, err := db.Query(ctx, `
WITH RECURSIVE waiting AS (
    (SELECT state, queue FROM river_job ORDER BY state, queue LIMIT 1)
    UNION ALL
    SELECT n.state, n.queue FROM waiting AS w,
    LATERAL (SELECT state, queue FROM river_job WHERE (state, queue) > (w.state, w.queue) ORDER BY state, queue LIMIT 1) AS n
)
SELECT DISTINCT queue FROM waiting
WHERE state IN ('available', 'retryable', 'scheduled') AND queue <> ALL($1::text[])
ORDER BY queue`, planned, live)
	if err != nil {
		return nil, fmt.Errorf("inbox: dead queues: %w", err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("inbox: dead queues: %w", err)
	}
	return dead, nil
}

// Move is a job MoveJobs moves: the job of an Orphan whose queue is no
// longer its source's.
type Move struct {
	JobID    int64
	From, To string
}

// MoveJobs moves each job of moves from its queue to its source's, in the
// caller's transaction, and returns how many it moved. A job is moved only
// while it still waits (available, retryable or scheduled) on From and no
// live worker works From (liveQueues): the statement locks the job row, so
// a job River fetched meanwhile (running) is left alone, and a move is
// never made twice. River's producers on To find it at their next fetch.
//
// Why not River: River has no public way to change a job's queue
// (JobUpdateParams carries only Output). Cancelling the job and inserting
// another would lose its attempt count and errors, and could not be
// conditioned on the job still waiting in the same statement.
func (s *Store) MoveJobs(ctx context.Context, db DBTX, moves []Move, liveQueues []string) (int, error) {
	if len(moves) == 0 {
		return 0, nil
	}
	ids, from, to := make([]int64, len(moves)), make([]string, len(moves)), make([]string, len(moves))
	for i, m := range moves {
		ids[i], from[i], to[i] = m.JobID, m.From, m.To
	}
	tag, err := db.Exec(ctx, `
UPDATE river_job AS j SET queue = m.dest
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS m (id, origin, dest)
WHERE j.id = m.id AND j.queue = m.origin AND j.state IN ('available', 'retryable', 'scheduled')
  AND m.origin <> ALL($4::text[])`, planned, ids, from, to, liveQueues)
	if err != nil {
		return 0, fmt.Errorf("inbox: move jobs: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// QueueDepth is the River jobs of one queue in one unfinished state.
type QueueDepth struct {
	Queue string `json:"queue"`
	// State is available, scheduled, retryable, running or pending.
	State string `json:"state"`
	Count int64  `json:"count"`
}

// QueueDepths counts River's unfinished jobs of every kind by queue and
// state: an inbox's backlog and its queues' depth are read together.
//
// Why not River: River's client has no count; JobList would page every
// unfinished job out to the process at each scrape.
func (s *Store) QueueDepths(ctx context.Context) ([]QueueDepth, error) {
	rows, err := s.pool.Query(ctx, `
SELECT queue, state::text, count(*) FROM river_job
WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending')
GROUP BY queue, state`)
	if err != nil {
		return nil, fmt.Errorf("inbox: queue depths: %w", err)
	}
	depths, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueueDepth])
	if err != nil {
		return nil, fmt.Errorf("inbox: queue depths: %w", err)
	}
	return depths, nil
}
