package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// heartbeatIntervalDefault is Config.HeartbeatInterval's default.
const heartbeatIntervalDefault = 10 * time.Second

// registrationLock is the transaction-scoped advisory lock that serialises
// registrations, so that two workers starting at once cannot both miss the
// other.
const registrationLock int64 = 0x686b726f75746573 // "hkroutes"

// The states of a worker's records in hookinbox_worker_routes.
const (
	// recordWorking: the worker works the queue.
	recordWorking = "working"
	// recordWaiting: the worker waits for the workers with other routes on
	// the queue to hand over.
	recordWaiting = "waiting"
)

// registration records, in hookinbox_worker_routes, the routes this worker
// runs on each queue it works, whether it works them or waits, and renews
// the record while the worker runs. It is the only code that touches that
// table. Its methods but fenced (which any goroutine calls) run on one
// goroutine at a time (Start's, then the Worker's rollout loop, then
// Stop's).
type registration struct {
	pool     *pgxpool.Pool
	id       string
	host     string
	pid      int
	queues   []string
	routes   []string // routes[i] is what this worker runs on queues[i]
	interval time.Duration
	// startedAt is the database's clock at the first claim: a route set
	// that started later is newer.
	startedAt time.Time
	// base and extended fence the worker (see fenced): extended is when,
	// counted from base on the monotonic clock, the last claim or renewal
	// that extended the records was sent; 0 before the first.
	base     time.Time
	extended atomic.Int64
}

// fenced reports whether the worker's records may have expired by now: no
// claim or renewal extended them for fenceAfter (a third of an interval
// short of their ttl). A fenced worker begins no event: a worker with other
// routes may take its queues over once they expire, and an event worked by
// both route sets is the one thing the records exist to prevent. It
// unfences itself as soon as a renewal lands. The records expire by the
// database's clock, from a statement sent after the time kept here, so the
// worker fences itself first whatever the clocks say.
func (r *registration) fenced() bool {
	sent := r.extended.Load()
	return sent != 0 && time.Since(r.base)-time.Duration(sent) > r.fenceAfter()
}

// fenceAfter is how long after its last extension the worker fences
// itself: a third of an interval before its records expire, time for the
// transactions it has under way to commit or roll back.
func (r *registration) fenceAfter() time.Duration { return r.ttl() - r.interval/3 }

// sending returns the time to keep in extended once a claim or renewal
// sent now has extended the records.
func (r *registration) sending() int64 { return int64(max(1, time.Since(r.base))) }

func newRegistration(pool *pgxpool.Pool, c *Config) *registration {
	queues := make([]string, 0, len(c.Queues))
	for q := range c.Queues {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	routes := make([]string, len(queues))
	for i, q := range queues {
		routes[i] = queueRoutes(c.Routes, c.Sources, q, c.Isolation, !c.UnroutedDone)
	}
	host, _ := os.Hostname()
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &registration{
		pool: pool, id: hex.EncodeToString(id[:]), host: host, pid: os.Getpid(),
		queues: queues, routes: routes, interval: c.HeartbeatInterval, base: time.Now(),
	}
}

// ttl is how long a record outlives its last renewal: a worker that died
// without deleting its record blocks a differently routed worker that long.
func (r *registration) ttl() time.Duration { return 3 * r.interval }

// otherWorker is a live worker that runs other routes than this one on one
// of its queues.
type otherWorker struct {
	// Queue is the shared queue.
	Queue string
	// Routes and TheirRoutes are what this worker and the other run there.
	Routes, TheirRoutes string
	// State is the other's record's: recordWorking or recordWaiting.
	State string
	// Host, PID and StartedAt identify the other worker.
	Host      string
	PID       int
	StartedAt time.Time
	// Expired is set when the other's record expired: the mark of a newer
	// worker that worked the queue and is out of reach, or dead (see
	// blocker).
	Expired bool
}

// fields are the log fields that describe o.
func (o *otherWorker) fields() []zap.Field {
	return []zap.Field{
		zap.String("queue", o.Queue), zap.String("routes", o.Routes), zap.String("their_routes", o.TheirRoutes),
		zap.String("their_state", o.State), zap.String("their_host", o.Host), zap.Int("their_pid", o.PID),
		zap.Time("their_started_at", o.StartedAt), zap.Bool("their_record_expired", o.Expired),
	}
}

// claim records this worker's routes on each of its queues, as working when
// it may work them, and returns nil; or, when another worker keeps it from
// them (see blocker: a live one working with other routes, a newer one
// that worked with other routes, or a newer one waiting with other
// routes), records them as waiting and returns that worker. The check and the record
// are one transaction under registrationLock, so of two route sets only one
// is ever working on a queue.
func (r *registration) claim(ctx context.Context) (*otherWorker, error) {
	return r.claimFor(ctx, false)
}

// reclaim is the claim of a working worker whose records were gone (they
// expired while the database was out of reach). With nobody else there it
// records the worker working again. When another route set works or waits
// on one of its queues (a newer one, or the record of a newer one that
// worked it: see blocker), the worker has lost them: reclaim deletes its
// records, and returns that worker; the worker drains and retires, fenced.
// A waiting record instead would tell an older set working the queue that
// a newer one waits for it: it would hand over and retire beside this one,
// and nobody would work the queue.
func (r *registration) reclaim(ctx context.Context) (*otherWorker, error) {
	return r.claimFor(ctx, true)
}

func (r *registration) claimFor(ctx context.Context, reclaiming bool) (*otherWorker, error) {
	sent := r.sending()
	var blocker *otherWorker
	// Durable, whatever the session's synchronous_commit: the worker acts
	// on what it records (it works, or the next claim counts its mark), so
	// a PostgreSQL crash must not lose it.
	err := pgx.BeginTxFunc(ctx, r.pool, inboxstore.DurableTxOptions(false), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, registrationLock); err != nil {
			return err
		}
		startedAt := r.startedAt
		if startedAt.IsZero() {
			// After the lock: a worker that claims later starts later.
			if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&startedAt); err != nil {
				return err
			}
		}
		// Expired records go, but those of workers that worked: such a
		// record stays as the mark that its route set worked the queue
		// (see blocker), until a claim on that queue newer still. A
		// claim says nothing of the queues it does not claim: one of
		// another queue (a worker that starts there, a waiting one that
		// polls, a reclaim after an outage) that deleted the mark would
		// let the older set work the queue again.
		if _, err := tx.Exec(ctx, `
DELETE FROM hookinbox_worker_routes
WHERE expires_at < now() AND NOT (state = 'working' AND (started_at > $1 OR queue <> ALL($2::text[])))`,
			startedAt, r.queues); err != nil {
			return err
		}
		var err error
		if blocker, err = r.blocker(ctx, tx, startedAt); err != nil {
			return err
		}
		state := recordWorking
		if blocker != nil {
			state = recordWaiting
			if reclaiming {
				_, err := tx.Exec(ctx, `DELETE FROM hookinbox_worker_routes WHERE worker_id = $1`, r.id)
				return err
			}
		}
		if _, err := tx.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, state, host, pid, started_at, expires_at)
SELECT $1, q.queue, q.routes, $4, $5, $6, $7, now() + $8 * interval '1 millisecond'
FROM unnest($2::text[], $3::text[]) AS q (queue, routes)
ON CONFLICT (queue, worker_id) DO UPDATE SET state = excluded.state, expires_at = excluded.expires_at`,
			r.id, r.queues, r.routes, state, r.host, r.pid, startedAt, r.ttl().Milliseconds()); err != nil {
			return err
		}
		// Kept before the COMMIT: one that commits with its answer lost
		// is the worker's start all the same (its records say so), and
		// Start's retry claims with it (a later start would make a route
		// set that started in between older than this worker).
		r.startedAt = startedAt
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("worker: register routes: %w", err)
	}
	if blocker == nil {
		// A claim that records the worker waiting leaves it fenced: it may
		// be a working worker whose records expired, and whose queue the
		// blocker works since; its fetched jobs must not begin while it
		// drains.
		r.extended.Store(sent)
	}
	return blocker, nil
}

// blocker returns the worker that keeps a worker started at startedAt from
// working its queues: a live one working with other routes, else a newer
// one that worked with other routes, its record expired or not (a route
// change never rolls back: an older route set never works a queue after a
// newer one did, even while the newer one is out of reach), else a live
// newer one waiting with other routes; nil when there is none.
func (r *registration) blocker(ctx context.Context, tx pgx.Tx, startedAt time.Time) (*otherWorker, error) {
	others, err := r.others(ctx, tx, `expires_at > now() AND (state = 'working' OR started_at > $3)
    OR state = 'working' AND started_at > $3`, startedAt)
	if err != nil || len(others) == 0 {
		return nil, err
	}
	return &others[0], nil
}

// newerWaiting returns a live worker with other routes that waits on one of
// this worker's queues and started after it, or nil.
func (r *registration) newerWaiting(ctx context.Context) (*otherWorker, error) {
	others, err := r.others(ctx, r.pool, `expires_at > now() AND state = 'waiting' AND started_at > $3`, r.startedAt)
	if err != nil {
		return nil, fmt.Errorf("worker: read waiting workers: %w", err)
	}
	var newer *otherWorker // nil: none waits
	if len(others) > 0 {
		newer = &others[0]
	}
	return newer, nil
}

// others returns the workers with other routes than this one on its
// queues whose records meet where (which may use $3, arg; it says whether
// an expired record counts), working ones first, then by queue and start.
func (r *registration) others(ctx context.Context, db inboxstore.DBTX, where string, arg any) ([]otherWorker, error) {
	rows, err := db.Query(ctx, `
SELECT queue, routes, state, host, pid, started_at, expires_at <= now() FROM hookinbox_worker_routes
WHERE queue = ANY($1::text[]) AND worker_id <> $2 AND (`+where+`)
ORDER BY state = 'working' DESC, queue, started_at`, r.queues, r.id, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []otherWorker
	for rows.Next() {
		var o otherWorker
		if err := rows.Scan(&o.Queue, &o.TheirRoutes, &o.State, &o.Host, &o.PID, &o.StartedAt, &o.Expired); err != nil {
			return nil, err
		}
		if o.Routes = r.routes[slices.Index(r.queues, o.Queue)]; o.Routes != o.TheirRoutes {
			out = append(out, o)
		}
	}
	return out, rows.Err()
}

// renew extends this worker's records while they live. It reports whether
// they all did (false when they were gone or had expired: the database was
// out of reach), and whether they all say working. A record that expired
// is never revived, only claimed again under registrationLock, where a
// worker with other routes may have taken the queue meanwhile. Only
// records that say working unfence the worker.
func (r *registration) renew(ctx context.Context) (live, working bool, err error) {
	sent := r.sending()
	// Durable, as a claim is: a renewal lost in a crash would leave the
	// worker unfenced past its record's expiry.
	var states []string
	err = pgx.BeginTxFunc(ctx, r.pool, inboxstore.DurableTxOptions(false), func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
UPDATE hookinbox_worker_routes SET expires_at = now() + $2 * interval '1 millisecond'
WHERE worker_id = $1 AND expires_at > now()
RETURNING state`,
			r.id, r.ttl().Milliseconds())
		if err != nil {
			return err
		}
		states, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return false, false, fmt.Errorf("worker: renew routes record: %w", err)
	}
	live = len(states) == len(r.queues)
	working = live && !slices.ContainsFunc(states, func(s string) bool { return s != recordWorking })
	if working {
		r.extended.Store(sent)
	}
	return live, working, nil
}

// liveQueues returns the queues some live worker works or waits to work:
// those with a record that has not expired.
func liveQueues(ctx context.Context, db pgx.Tx) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT queue FROM hookinbox_worker_routes WHERE expires_at > now() ORDER BY queue`)
	if err != nil {
		return nil, fmt.Errorf("worker: live queues: %w", err)
	}
	queues, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("worker: live queues: %w", err)
	}
	return queues, nil
}

// deleteTimeout bounds registration.delete's tries, and deleteRetryLine is
// what it logs at its first failure.
const (
	deleteTimeout   = 5 * time.Second
	deleteRetryLine = "could not delete this worker's routes record; trying again"
)

// delete deletes this worker's records, so that a worker with other routes
// may work its queues at once. A worker stopped while its database restarts
// tries again, every quarter second, for its 5 seconds (it logs the first
// failure): else the record outlives it until its TTL, and the successor
// waits that long.
func (r *registration) delete(ctx context.Context, logger *zap.Logger) error {
	// Stop may have spent ctx on a hard stop; the delete gets its own time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	for tries := 1; ; tries++ {
		_, err := r.pool.Exec(ctx, `DELETE FROM hookinbox_worker_routes WHERE worker_id = $1`, r.id)
		if err == nil {
			return nil
		}
		if tries == 1 {
			logger.Warn(deleteRetryLine, zap.Duration("for", deleteTimeout), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("worker: delete routes record: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
