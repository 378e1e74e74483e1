package inboxstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBTX is the subset of pgx that both *pgxpool.Pool and pgx.Tx satisfy, so
// that every write can join a caller's transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// planned asks pgx to run a statement as an unnamed prepared statement, so
// that PostgreSQL plans it for the table as it is at every execution.
//
// Every statement here that finds rows of webhook_inbox by id or key is run
// this way. Under pgx's default mode a statement is prepared once per
// connection, and after five runs PostgreSQL may keep a generic plan for
// good. A generic plan made while the table is empty or tiny (a fresh
// install, the first minute of a burst) is a sequential scan, and it stays
// cached until autovacuum or ANALYZE invalidates it, so a key lookup turns
// into a scan of the whole, growing inbox. The benchmark caught it: the
// receiver's job link took 0.78 ms a call instead of about 0.2 ms. Planning these
// small statements every time costs tens of microseconds and is always the
// index scan. The claim itself (an INSERT that reads nothing) keeps the
// default mode.
const planned = pgx.QueryExecModeCacheDescribe

// Store runs the statements on webhook_inbox: every read and write of the
// product goes through it (the benchmark, bench/, keeps its own measuring
// statements, and internal/testkit/bulkload loads rows for tests and the
// benchmark). A method that may join a caller's transaction takes a DBTX
// (or a pgx.Tx, where it must run in one); the others run on the store's
// pool.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store whose own statements run on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// ClaimedRow is a row the claim inserted.
type ClaimedRow struct {
	ID      int64
	Source  string
	EventID string
	Status  Status
	// EventType and RequestID are copied into the row's job's args.
	EventType string
	RequestID string
}

// Claim applies the inbox's key policy to the deliveries' events (see
// Delivery) and inserts them in one statement, in the caller's transaction
// or on db alone: the one claim statement (claim) without the Ingester's
// transaction, retries or job. The product claims through the Ingester;
// tests use Claim for rows that have no job (orphans) or a pinned arrival
// time. now may be zero for the database's clock.
func (s *Store) Claim(ctx context.Context, db DBTX, deliveries []*Delivery, now time.Time) ([]ClaimedRow, error) {
	return s.claim(ctx, db, deliveryEvents(deliveries), now)
}

// claim inserts the events in one statement. It names no conflict
// target, so every unique key of webhook_inbox is enforced at once (the
// (source, event_id) key and the (source, twin_key) key), and a row that conflicts
// with any of them (including an earlier row of the same batch) is skipped.
// It returns only the rows it inserted. now may be zero for the database's
// clock.
//
// Rows are inserted in (source, event_id) order, whatever the input order,
// so that concurrent claims of overlapping events take their unique-index
// entries in the same order and cannot deadlock on them. Of several events
// with one (source, event_id), the first in input order is the one inserted;
// of twins in one claim (different ids, one twin key), the smaller event id.
func (s *Store) claim(ctx context.Context, db DBTX, events []newEvent, now time.Time) ([]ClaimedRow, error) {
	n := len(events)
	var (
		sources, providers, eventIDs, types = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		payloads, failReasons, twinKeys     = make([]*string, n), make([]*string, n), make([]*string, n)
		bodies                              = make([][]byte, n)
		headers, statuses                   = make([]string, n), make([]string, n)
		requestIDs                          = make([]*string, n)
	)
	for i, ev := range events {
		sources[i], providers[i], eventIDs[i], types[i] = ev.Source, ev.Provider, ev.EventID, ev.EventType
		bodies[i] = ev.Body
		if bodies[i] == nil {
			bodies[i] = []byte{}
		}
		statuses[i] = string(StatusPending)
		if ev.FailReason != "" {
			statuses[i] = string(StatusFailed)
			failReasons[i] = &ev.FailReason
		} else if ev.Payload != nil {
			p := string(ev.Payload)
			payloads[i] = &p
		}
		if ev.TwinKey != "" {
			twinKeys[i] = &ev.TwinKey
		}
		if ev.RequestID != "" {
			requestIDs[i] = &ev.RequestID
		}
		h, err := json.Marshal(ev.Headers)
		if err != nil {
			return nil, fmt.Errorf("inbox: encode headers: %w", err)
		}
		headers[i] = string(h)
	}
	// The row and its delivery's bytes go in one statement. The bytes join
	// the claimed rows on the row's keys; of several copies of one event in
	// the batch, the first is the one the INSERT kept.
	rows, err := db.Query(ctx, `
WITH u AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::text[], $10::text[],
                         $12::text[])
    WITH ORDINALITY AS u(source, provider, event_id, event_type, payload, body, headers, status, last_error, twin_key, request_id, ord)
), claimed AS (
    INSERT INTO webhook_inbox (source, provider, event_id, event_type, status, last_error, twin_key, received_at, request_id, attempt_errors)
    SELECT u.source, u.provider, u.event_id, u.event_type, u.status, u.last_error, u.twin_key, coalesce($11::timestamptz, now()), u.request_id,
           CASE WHEN u.last_error IS NULL THEN '[]'::jsonb
                ELSE jsonb_build_array(jsonb_build_object('at', coalesce($11::timestamptz, now()), 'attempt', 0, 'error', u.last_error)) END
    FROM u
    ORDER BY u.source, u.event_id, u.ord
    ON CONFLICT DO NOTHING
    RETURNING id, source, event_id, twin_key, status, event_type, coalesce(request_id, '') AS request_id
), stored AS (
    INSERT INTO webhook_inbox_delivery (inbox_id, payload, body, headers)
    SELECT c.id, f.payload::jsonb, f.body, f.headers::jsonb
    FROM claimed AS c
    JOIN (SELECT DISTINCT ON (source, event_id, twin_key) * FROM u ORDER BY source, event_id, twin_key, ord) AS f
      ON f.source = c.source AND f.event_id = c.event_id AND f.twin_key IS NOT DISTINCT FROM c.twin_key
)
SELECT id, source, event_id, status, event_type, request_id FROM claimed`,
		sources, providers, eventIDs, types, payloads, bodies, headers, statuses, failReasons, twinKeys, nullTime(now), requestIDs)
	if err != nil {
		return nil, fmt.Errorf("inbox: claim: %w", err)
	}
	claimed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ClaimedRow])
	if err != nil {
		return nil, fmt.Errorf("inbox: claim: %w", err)
	}
	return claimed, nil
}

// existingEventIDs returns which of the (source, event_id) pairs exist. The
// Ingester asks it about the events a claim skipped: a skipped event whose
// id exists is a duplicate, any other was stopped by its twin key.
func (s *Store) existingEventIDs(ctx context.Context, db DBTX, sources, eventIDs []string) (map[[2]string]bool, error) {
	rows, err := db.Query(ctx, `
SELECT i.source, i.event_id FROM webhook_inbox AS i
JOIN unnest($1::text[], $2::text[]) AS u(source, event_id) ON i.source = u.source AND i.event_id = u.event_id`,
		planned, sources, eventIDs)
	if err != nil {
		return nil, fmt.Errorf("inbox: look up skipped events: %w", err)
	}
	defer rows.Close()
	found := map[[2]string]bool{}
	for rows.Next() {
		var key [2]string
		if err := rows.Scan(&key[0], &key[1]); err != nil {
			return nil, fmt.Errorf("inbox: look up skipped events: %w", err)
		}
		found[key] = true
	}
	return found, rows.Err()
}

func scanEvent(row pgx.Row) (*Event, error) {
	var ev Event
	var status string
	// The payload is scanned as bytes: into a json.RawMessage pgx would run
	// json.Unmarshal over it, validating what jsonb already validated
	// (about a tenth of a worker's CPU).
	var payload []byte
	err := row.Scan(&ev.ID, &ev.Source, &ev.Provider, &ev.EventID, &ev.EventType, &payload, &ev.Body,
		&ev.Headers, &status, &ev.Attempts, &ev.LastError, &ev.ReceivedAt, &ev.RequestID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("inbox: read event: %w", err)
	}
	ev.Status = Status(status)
	if payload != nil {
		ev.Payload = json.RawMessage(payload)
	}
	return &ev, nil
}

// WorkTxOptions are the options of a worker's transaction. BEGIN goes in one
// round trip with, when asyncCommit is set,
// `SET LOCAL synchronous_commit = off`.
//
// asyncCommit makes the transaction's COMMIT not wait for the WAL flush.
// That is safe for a worker's transaction and only for it: a commit lost in
// a crash loses the effect, the done mark and the job's completion together,
// so the job simply runs again. The receiver's claim never does this,
// because its 2xx promises durability.
func WorkTxOptions(asyncCommit bool) pgx.TxOptions {
	if !asyncCommit {
		return pgx.TxOptions{}
	}
	// Exec without arguments uses the simple protocol, which runs both
	// statements from one message.
	return pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}
}

// legacyDelivery returns, from webhook_inbox AS i, the bytes a row received
// before migration 0011 kept in the row itself; deliveryColumns reads a
// row's payload, body and headers from its webhook_inbox_delivery AS d,
// or from those legacy columns (selected as m) for such a row.
const (
	legacyDelivery  = `i.legacy_payload, i.legacy_body, i.legacy_headers`
	deliveryColumns = `coalesce(d.payload, m.legacy_payload), coalesce(d.body, m.legacy_body), coalesce(d.headers, m.legacy_headers)`
)

// Taken is a row Take took: the event as it was before the done mark, and
// what UndoTakes needs to put the row back.
type Taken struct {
	// Event is the row as it was before the mark.
	Event *Event
	// JobID is the job the row was taken for.
	JobID int64
	// processedAt is the row's processed_at before the mark (set on a failed
	// row that is being replayed).
	processedAt *time.Time
}

// Take is the one take, of one job's row (a slice of one) or of a group's,
// in one statement, in tx: a worker's whole start of work is one round
// trip. It locks the rows of ids that are not done, in id order (so that
// concurrent groups over overlapping rows cannot deadlock on them), marks
// them done, and returns them by id, each with the job of jobIDs (parallel
// to ids) it was taken for, and its event as it was before the mark
// (status pending or failed, the earlier attempts, the request id). A row
// that ends done has no last_error (its failed attempts stay in its attempt
// history). The caller then runs the handlers in tx; if they fail, tx rolls
// back and the done mark with it (or the caller puts the row back with
// UndoTakes).
//
// A row with nothing to do is absent from the map: done already (a stray
// or replayed job), erased (its payload purged), or gone (pruned). A
// concurrent worker holding a row makes Take wait; once that one commits,
// the row is done and absent. Of several jobs for one row, the last one is
// the row's.
func (s *Store) Take(ctx context.Context, tx pgx.Tx, ids, jobIDs []int64, now time.Time) (map[int64]*Taken, error) {
	rows, err := tx.Query(ctx, `
WITH wanted AS (
    SELECT DISTINCT ON (id) id, job_id FROM unnest($1::bigint[], $2::bigint[]) AS u(id, job_id) ORDER BY id, job_id DESC
), taken AS (
    SELECT i.id, i.status, i.attempts, i.processed_at, i.last_error, w.job_id
    FROM webhook_inbox AS i JOIN wanted AS w ON w.id = i.id
    WHERE i.status <> 'done' AND i.erased_at IS NULL
    ORDER BY i.id
    FOR UPDATE OF i
), marked AS (
    UPDATE webhook_inbox AS i
    SET status = 'done', processed_at = coalesce($3::timestamptz, now()), attempts = taken.attempts + 1, note = NULL, last_error = NULL
    FROM taken
    WHERE i.id = taken.id
    RETURNING i.id, i.source, i.provider, i.event_id, i.event_type, `+legacyDelivery+`, taken.status AS was,
              taken.attempts AS attempts_before, taken.last_error AS error_before, i.received_at, taken.job_id,
              taken.processed_at AS processed_before, i.request_id
)
SELECT m.id, m.source, m.provider, m.event_id, m.event_type, `+deliveryColumns+`, m.was,
       m.attempts_before, coalesce(m.error_before, ''), m.received_at, coalesce(m.request_id, ''), m.job_id, m.processed_before
FROM marked AS m LEFT JOIN webhook_inbox_delivery AS d ON d.inbox_id = m.id`,
		planned, ids, jobIDs, nullTime(now))
	if err != nil {
		return nil, fmt.Errorf("inbox: take events: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]*Taken, len(ids))
	for rows.Next() {
		var (
			ev      Event
			status  string
			payload []byte
			t       = Taken{Event: &ev}
		)
		if err := rows.Scan(&ev.ID, &ev.Source, &ev.Provider, &ev.EventID, &ev.EventType, &payload, &ev.Body,
			&ev.Headers, &status, &ev.Attempts, &ev.LastError, &ev.ReceivedAt, &ev.RequestID, &t.JobID, &t.processedAt); err != nil {
			return nil, fmt.Errorf("inbox: take events: %w", err)
		}
		ev.Status = Status(status)
		if payload != nil {
			ev.Payload = json.RawMessage(payload)
		}
		out[ev.ID] = &t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inbox: take events: %w", err)
	}
	return out, nil
}

// TakeFailure is why a taken event's handlers failed.
type TakeFailure struct {
	// Reason is the handlers' error, kept in last_error.
	Reason string
	// Final marks the row failed (poison, or a permanent error).
	Final bool
}

// UndoTakes puts back rows Take took, in the group's transaction, in one
// statement, after their handlers' writes were rolled back to a savepoint.
// failures is nil or parallel to ts. With a failure, a row keeps the
// counted attempt and the error (in last_error and its attempt history),
// and returns to the status it had, or becomes failed when the failure is
// final. With none (the event is to be worked again, alone) the row is as
// it was before the take. now may be zero for the database's clock.
func (s *Store) UndoTakes(ctx context.Context, tx pgx.Tx, ts []*Taken, failures []*TakeFailure, now time.Time) error {
	if len(ts) == 0 {
		return nil
	}
	if failures != nil && len(failures) != len(ts) {
		return fmt.Errorf("inbox: undo takes: %d failures for %d rows", len(failures), len(ts))
	}
	n := len(ts)
	var (
		ids, jobIDs       = make([]int64, n), make([]int64, n)
		attempts          = make([]int32, n)
		reasons, statuses = make([]string, n), make([]string, n)
		processed         = make([]*time.Time, n)
		failed, final     = make([]bool, n), make([]bool, n)
	)
	for i, t := range ts {
		ids[i], jobIDs[i], attempts[i], reasons[i] = t.Event.ID, t.JobID, int32(t.Event.Attempts), t.Event.LastError
		statuses[i], processed[i] = string(t.Event.Status), t.processedAt
		if failures != nil && failures[i] != nil {
			f := failures[i]
			attempts[i], reasons[i], failed[i], final[i] = attempts[i]+1, Storable(f.Reason), true, f.Final
		}
	}
	_, err := tx.Exec(ctx, `
UPDATE webhook_inbox AS i
SET last_error = nullif(u.reason, ''), attempts = u.attempts,
    status = CASE WHEN u.final THEN 'failed' ELSE u.status END,
    processed_at = CASE WHEN u.final THEN coalesce($9::timestamptz, now()) ELSE u.processed_at END,
    attempt_errors = CASE WHEN u.failed THEN `+appendAttemptError("$9::timestamptz", "u.attempts", "u.job_id", "u.reason")+` ELSE attempt_errors END
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $6::bool[], $7::bool[], $8::bigint[])
     AS u(id, reason, attempts, status, processed_at, failed, final, job_id)
WHERE i.id = u.id`, planned, ids, reasons, attempts, statuses, processed, failed, final, jobIDs, nullTime(now))
	if err != nil {
		return fmt.Errorf("inbox: undo takes: %w", err)
	}
	return nil
}

// SetNote records a remark on a row, in the caller's transaction or on db
// alone.
func (s *Store) SetNote(ctx context.Context, db DBTX, id int64, note string) error {
	if _, err := db.Exec(ctx, `UPDATE webhook_inbox SET note = $2 WHERE id = $1`, planned, id, note); err != nil {
		return fmt.Errorf("inbox: set note: %w", err)
	}
	return nil
}

// RecordFailure counts a failed handler run and keeps its error (as
// last_error, and appended to the row's attempt history), in a
// transaction of its own since the handler's rolled back. With final it
// also marks the row failed (poison, or a permanent error). A row that is
// already done is left alone.
func (s *Store) RecordFailure(ctx context.Context, db DBTX, id, jobID int64, reason string, final bool, now time.Time) error {
	_, err := db.Exec(ctx, `
UPDATE webhook_inbox
SET attempts = attempts + 1, last_error = $3, status = CASE WHEN $4 THEN 'failed' ELSE status END,
    processed_at = CASE WHEN $4 THEN coalesce($5::timestamptz, now()) ELSE processed_at END,
    attempt_errors = `+appendAttemptError("$5::timestamptz", "attempts + 1", "nullif($2::bigint, 0)", "$3")+`
WHERE id = $1 AND status <> 'done'`, planned, id, jobID, Storable(reason), final, nullTime(now))
	if err != nil {
		return fmt.Errorf("inbox: record failure: %w", err)
	}
	return nil
}

// Storable returns a failure's text as PostgreSQL can store it, in a row's
// text and in River's jsonb errors alike: each NUL byte, which neither
// takes (22021, 22P05), as the four characters \x00, and invalid UTF-8 as
// U+FFFD. A handler's error may quote anything, a downstream answer say;
// written as is, its row recorded nothing and River's completer could not
// settle its job, nor any job completed beside it.
func Storable(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\x00`)
}

// Orphan is a pending row the reaper found with no job that will settle it.
type Orphan struct {
	ID      int64
	Source  string
	EventID string
	// JobID is the id of the row's last job, 0 when it has none; of a
	// stray, the id of the job to move.
	JobID int64
	// JobState is the state of that job, "" when it has none.
	JobState string
	// JobQueue is that job's queue.
	JobQueue string
	// JobError is that job's last recorded error.
	JobError string
	// EventType and RequestID are copied into a new job's args.
	EventType string
	RequestID string
}

// OrphanQuery says which rows ListOrphans returns.
type OrphanQuery struct {
	// OrphanAfter is how long after it was received a row with no job, or
	// a finished one, waits before it is an orphan.
	OrphanAfter time.Duration
	// LostCommits looks for lost commits too (see ListOrphans): the
	// reaper sets it within OrphanAfter of a restart or a promotion of the
	// server (see NoteServer).
	LostCommits bool
	// LostCommitGrace is how long after its newest job finished a pending
	// row that is not held is a lost commit (see ListOrphans).
	LostCommitGrace time.Duration
	// Queues maps each source to its current queue.
	Queues map[string]string
	// LiveQueues are the queues some live worker works.
	LiveQueues []string
	// Limit caps the rows returned.
	Limit int
}

// ListOrphans locks up to q.Limit rows whose job will not serve them
// (pending rows, or a stray's done row), skipping rows another transaction
// holds and the rows of paused sources (their held events wait for
// Resume). Every time is compared by the database. A row is returned when
//
//   - its job is missing or finished and it was received more than
//     q.OrphanAfter ago (the job vanished, or its end was not recorded),
//     and it is not parked behind its sequence key (see ParkSequenceTx);
//   - it is a lost commit, looked for with q.LostCommits only: its newest
//     job finished (completed, discarded, cancelled) more than
//     q.LostCommitGrace ago (River stamps finalized_at when Work returned),
//     and it is neither held nor parked. No job will settle such a row: a
//     worker returns nil without the row's done mark only for a held or
//     parked event or a row that is no longer pending, and records a final
//     failure on the row before River discards or cancels the job. So a
//     write on the row was lost (an asynchronous commit that a crash or a
//     promotion lost, or a failure the worker could not record while the
//     database was away) while River's completer, retrying across the
//     outage, finished the job afterwards; or River's rescuer discarded the
//     job of a worker that died. OrphanAfter after an outage the first rule
//     finds such rows anyway (received before it), so the reaper asks for
//     this rule only within OrphanAfter of a restart or a promotion (see
//     NoteServer), which keeps the scan of every pending row, and its
//     job's lookup, off its other passes;
//   - it is a stray: a job of it waits (available, retryable, scheduled)
//     on a queue that is no longer its source's and that no live worker
//     works, while a live worker works the source's queue (see MoveJobs):
//     a pending row's newest job, or any job of a done row (it then runs
//     as a no-op). The Orphan names that job.
//
// db is the caller's transaction, which holds the locks. A row is returned
// once, by the first rule it meets (a row with two stray jobs has its
// second moved by the next call).
func (s *Store) ListOrphans(ctx context.Context, db DBTX, q *OrphanQuery) ([]Orphan, error) {
	var all []Orphan
	seen := map[int64]bool{}
	add := func(sql string, args ...any) error {
		if len(all) >= q.Limit {
			return nil
		}
		rows, err := db.Query(ctx, sql+`
LIMIT $1
FOR UPDATE OF i SKIP LOCKED`, append([]any{planned, q.Limit - len(all)}, args...)...)
		if err != nil {
			return fmt.Errorf("inbox: list orphans: %w", err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Orphan])
		if err != nil {
			return fmt.Errorf("inbox: list orphans: %w", err)
		}
		for _, o := range found {
			if !seen[o.ID] {
				seen[o.ID] = true
				all = append(all, o)
			}
		}
		return nil
	}
	if err := add(orphanColumns+`
WHERE i.status = 'pending' AND i.received_at < now() - $2 * interval '1 millisecond' AND `+notPaused+` AND `+notParked+`
  AND (j.id IS NULL OR j.state IN ('completed', 'discarded', 'cancelled'))
ORDER BY i.received_at`, q.OrphanAfter.Milliseconds()); err != nil {
		return nil, err
	}
	if q.LostCommits {
		if err := add(orphanColumns+`
WHERE i.status = 'pending' AND i.held_at IS NULL AND `+notPaused+` AND `+notParked+`
  AND j.state IN ('completed', 'discarded', 'cancelled') AND j.finalized_at < now() - $2 * interval '1 millisecond'
ORDER BY i.received_at`, q.LostCommitGrace.Milliseconds()); err != nil {
			return nil, err
		}
	}
	dead, err := s.deadQueues(ctx, db, q.LiveQueues)
	if err != nil || len(dead) == 0 {
		return all, err
	}
	sources, queues := make([]string, 0, len(q.Queues)), make([]string, 0, len(q.Queues))
	for src, queue := range q.Queues {
		if slices.Contains(q.LiveQueues, queue) {
			sources, queues = append(sources, src), append(queues, queue)
		}
	}
	// Driven by the waiting jobs of the dead queues (River's fetching
	// index), not by every pending row. A pending row's newest job is
	// moved, and once the row is done any job of it: it runs as the no-op
	// it is (a worker killed between its commit and River's completion
	// leaves one, rescued; or one killed after it held the event, whose
	// Resume enqueued a newer job that ran), where on the dead queue it
	// would wait for ever, counted in the queue's depth. Not a pending
	// row's older job: it would run beside the newest, with River attempts
	// the row was never charged, and its last one would fail the row for
	// good. Nor a failed row's: its job runs the handlers again (that is
	// how River UI replays an event), which only an operator asks for.
	if err := add(`
SELECT i.id, i.source, i.event_id, j.id, j.state::text, j.queue, '', i.event_type, coalesce(i.request_id, '')
FROM (`+waitingJobs("$2")+`) AS j
JOIN webhook_inbox AS i ON i.id = j.inbox_id
JOIN unnest($3::text[], $4::text[]) AS m (source, queue) ON m.source = i.source
WHERE j.queue <> m.queue AND `+notPaused+`
  AND (i.status = 'done' OR i.status = 'pending' AND j.id = (SELECT n.id FROM (`+newestJob+`) AS n))
ORDER BY j.id`, dead, sources, queues); err != nil {
		return nil, err
	}
	return all, nil
}

// orphanColumns is the head of ListOrphans' statements.
const orphanColumns = `
SELECT i.id, i.source, i.event_id, coalesce(j.id, 0), coalesce(j.state, ''), coalesce(j.queue, ''),
       coalesce(j.last_error, ''), i.event_type, coalesce(i.request_id, '')
FROM webhook_inbox AS i
LEFT JOIN LATERAL (` + newestJob + `) AS j ON true`

// notPaused leaves out the rows of paused sources.
const notPaused = `NOT EXISTS (SELECT 1 FROM hookinbox_source_pause AS p WHERE p.source = i.source)`

// notParked leaves out the rows parked behind their sequence key (see
// ParkSequenceTx): their jobs completed by design, and a run of their key
// wakes them; the reaper wakes a stalled key on its own
// (ListStalledSequences).
const notParked = `NOT EXISTS (SELECT 1 FROM hookinbox_sequence_park AS k WHERE k.inbox_id = i.id)`

// Now returns the database's clock, which stamps received_at. An
// operator's relative time ("since 1h") is resolved against it, never
// against the clock of the machine the command runs on.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("inbox: database clock: %w", err)
	}
	return now, nil
}

// Counts is the number of rows per status.
type Counts struct {
	Pending, Done, Failed int64
}

// Filter selects rows for Count and ListFailed. The zero value, and nil,
// select every row.
type Filter struct {
	// Source, when set, selects the rows of one source.
	Source string
	// EventIDPrefix, when set, selects the rows whose event id starts with
	// it (a demo's run, say).
	EventIDPrefix string
}

// Count counts the rows filter selects, by status.
func (s *Store) Count(ctx context.Context, filter *Filter) (*Counts, error) {
	if filter == nil {
		filter = &Filter{}
	}
	var c Counts
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'pending'),
       count(*) FILTER (WHERE status = 'done'),
       count(*) FILTER (WHERE status = 'failed')
FROM webhook_inbox
WHERE ($1 = '' OR source = $1) AND ($2 = '' OR starts_with(event_id, $2))`,
		filter.Source, filter.EventIDPrefix).Scan(&c.Pending, &c.Done, &c.Failed)
	if err != nil {
		return nil, fmt.Errorf("inbox: count: %w", err)
	}
	return &c, nil
}

// Failure is a failed row as ListFailed returns it.
type Failure struct {
	// EventID is the row's event id.
	EventID string
	// LastError says why it failed.
	LastError string
}

// ListFailed returns the failed rows filter selects, oldest first.
func (s *Store) ListFailed(ctx context.Context, filter *Filter) ([]Failure, error) {
	if filter == nil {
		filter = &Filter{}
	}
	rows, err := s.pool.Query(ctx, `
SELECT event_id, coalesce(last_error, '') FROM webhook_inbox
WHERE status = 'failed' AND ($1 = '' OR source = $1) AND ($2 = '' OR starts_with(event_id, $2))
ORDER BY id`, filter.Source, filter.EventIDPrefix)
	if err != nil {
		return nil, fmt.Errorf("inbox: list failed: %w", err)
	}
	failures, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Failure])
	if err != nil {
		return nil, fmt.Errorf("inbox: list failed: %w", err)
	}
	return failures, nil
}

// checkJSONB returns PostgreSQL's error when jsonb refuses payload, which
// Go's decoder accepted (an unpaired surrogate escape, say), and nil when
// jsonb takes it or the probe itself failed.
func (s *Store) checkJSONB(ctx context.Context, payload []byte) error {
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT $1::text::jsonb IS NOT NULL", string(payload)).Scan(&ok)
	if err != nil && ClassifyPg(err) == PgData {
		return err
	}
	return nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
