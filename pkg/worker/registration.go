package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// registrationLock is the transaction-scoped advisory lock that serialises
// registrations, so that two workers starting at once cannot both miss the
// other.
const registrationLock int64 = 0x686b726f75746573 // "hkroutes"

// registration records, in hookinbox_worker_routes, the routes this worker
// runs on each queue it works, and renews the record while the worker runs.
// It is the only code that touches that table.
type registration struct {
	pool     *pgxpool.Pool
	id       string
	host     string
	pid      int
	queues   []string
	routes   []string // routes[i] is what this worker runs on queues[i]
	interval time.Duration
	logger   *zap.Logger

	stop chan struct{}
	done chan struct{}
}

func newRegistration(pool *pgxpool.Pool, c *Config) *registration {
	queues := make([]string, 0, len(c.Queues))
	for q := range c.Queues {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	routes := make([]string, len(queues))
	for i, q := range queues {
		routes[i] = queueRoutes(c.Routes, c.Sources, q, !c.UnroutedDone)
	}
	host, _ := os.Hostname()
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &registration{
		pool: pool, id: hex.EncodeToString(id[:]), host: host, pid: os.Getpid(),
		queues: queues, routes: routes, interval: c.HeartbeatInterval, logger: c.Logger,
	}
}

// ttl is how long a record outlives its last renewal: a worker that died
// without deleting its record blocks a differently routed worker that long.
func (r *registration) ttl() time.Duration { return 3 * r.interval }

// routesConflictError is returned by Start when a live worker works one of
// this worker's queues with different routes.
type routesConflictError struct {
	// Queue is the shared queue.
	Queue string
	// Routes and TheirRoutes are what this worker and the other run there.
	Routes, TheirRoutes string
	// Host, PID and StartedAt identify the other worker.
	Host      string
	PID       int
	StartedAt time.Time
}

func (e *routesConflictError) Error() string {
	return fmt.Sprintf("worker.routes: a live worker (host %s, pid %d, up since %s) works queue %q with other routes: "+
		"it runs [%s], this worker would run [%s]; workers sharing a queue must share its routes, or each settles events "+
		"the other has the handlers for. Stop the other workers first (to change routes, stop the old workers before "+
		"starting the new ones), or give the sources whose routes differ a queue of their own",
		e.Host, e.PID, e.StartedAt.UTC().Format(time.RFC3339), e.Queue, e.TheirRoutes, e.Routes)
}

// register records this worker's routes, or returns a *routesConflictError
// when a live worker runs other routes on one of its queues.
func (r *registration) register(ctx context.Context) error {
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, registrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM hookinbox_worker_routes WHERE expires_at < now()`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
SELECT queue, routes, host, pid, started_at FROM hookinbox_worker_routes
WHERE queue = ANY($1::text[]) AND worker_id <> $2
ORDER BY queue, started_at`, r.queues, r.id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var c routesConflictError
			if err := rows.Scan(&c.Queue, &c.TheirRoutes, &c.Host, &c.PID, &c.StartedAt); err != nil {
				return err
			}
			c.Routes = r.routes[slices.Index(r.queues, c.Queue)]
			if c.Routes != c.TheirRoutes {
				rows.Close()
				return &c
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, host, pid, expires_at)
SELECT $1, q.queue, q.routes, $4, $5, now() + $6 * interval '1 millisecond'
FROM unnest($2::text[], $3::text[]) AS q (queue, routes)
ON CONFLICT (queue, worker_id) DO UPDATE SET expires_at = excluded.expires_at`,
			r.id, r.queues, r.routes, r.host, r.pid, r.ttl().Milliseconds())
		return err
	})
}

// renew extends this worker's records, registering again when they expired
// (the database was out of reach for longer than the ttl).
func (r *registration) renew(ctx context.Context) error {
	tag, err := r.pool.Exec(ctx, `
UPDATE hookinbox_worker_routes SET expires_at = now() + $2 * interval '1 millisecond' WHERE worker_id = $1`,
		r.id, r.ttl().Milliseconds())
	if err != nil {
		return err
	}
	if tag.RowsAffected() == int64(len(r.queues)) {
		return nil
	}
	return r.register(ctx)
}

// start registers, then renews every interval until stopAndDelete.
func (r *registration) start(ctx context.Context) error {
	if err := r.register(ctx); err != nil {
		var conflict *routesConflictError
		if errors.As(err, &conflict) {
			return err
		}
		return fmt.Errorf("worker: register routes: %w", err)
	}
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.heartbeat(context.WithoutCancel(ctx))
	return nil
}

func (r *registration) heartbeat(ctx context.Context) {
	defer close(r.done)
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-ticker.C:
		}
		renewCtx, cancel := context.WithTimeout(ctx, r.interval)
		err := r.renew(renewCtx)
		cancel()
		var conflict *routesConflictError
		switch {
		case errors.As(err, &conflict):
			// Our record expired while the database was out of reach, and
			// a worker with other routes started meanwhile.
			r.logger.Error("another worker runs other routes on a shared queue; stop one of them", zap.Error(err))
		case err != nil:
			r.logger.Warn("could not renew the worker's routes record", zap.Error(err))
		}
	}
}

// liveQueues returns the queues some live worker works: those with a
// record that has not expired.
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

// stopAndDelete stops the heartbeat and deletes this worker's records, so
// that a worker with other routes may start at once.
func (r *registration) stopAndDelete(ctx context.Context) error {
	if r.stop == nil {
		return nil
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
	// Stop may have spent ctx on a hard stop; the delete gets its own time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := r.pool.Exec(ctx, `DELETE FROM hookinbox_worker_routes WHERE worker_id = $1`, r.id); err != nil {
		return fmt.Errorf("worker: delete routes record: %w", err)
	}
	return nil
}
