package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// SliceDefault is WorkerConfig.Slice's default.
const SliceDefault = 20 * time.Second

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// QueueFor names the queue of a source's event jobs. Defaults to River's
	// default queue.
	QueueFor func(source string) string
	// Slice is how long one job works a run before it hands the run to a
	// new job and returns, so that a long replay never outlives a job's
	// timeout (and River's rescuer never takes a job that is still
	// working). Keep it under the worker's job timeout. Defaults to 20s.
	Slice time.Duration
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Worker is the River worker of bulk replays (Args). pkg/worker registers
// it.
type Worker struct {
	river.WorkerDefaults[Args]

	pool   *pgxpool.Pool
	store  *inboxstore.Store
	config WorkerConfig
}

// NewWorker returns the worker of bulk replays on pool.
func NewWorker(pool *pgxpool.Pool, config *WorkerConfig) *Worker {
	c := *config
	if c.QueueFor == nil {
		c.QueueFor = func(string) string { return river.QueueDefault }
	}
	c.Slice = cmp.Or(c.Slice, SliceDefault)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return &Worker{pool: pool, store: inboxstore.New(pool), config: c}
}

// errStop ends a job's work on its run without an error: the run was
// cancelled, finished, or handed to another job.
var errStop = errors.New("replay: stop")

// Work replays the run's rows batch by batch, each batch in a transaction
// that also advances the run's cursor, at the run's rate, for at most a
// slice; then it hands the run to a new job. It stops as soon as the run is
// no longer running with this job.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	log := w.config.Logger.With(zap.Int64("replay_run", job.Args.RunID), zap.Int64("job_id", job.ID))
	deadline := time.Now().Add(w.config.Slice)
	for {
		start := time.Now()
		n, rate, err := w.batch(ctx, client, job, log)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
		// Pace: a batch of n rows takes at least n/rate seconds.
		if err := pace(ctx, start, n, rate); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return w.handOver(ctx, client, job, log)
		}
	}
}

// batch replays one batch of the run and returns its size and the run's
// rate.
func (w *Worker) batch(ctx context.Context, client *river.Client[pgx.Tx], job *river.Job[Args], log *zap.Logger) (n, rate int, err error) {
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		run, err := scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM hookinbox_replay WHERE id = $1`, job.Args.RunID))
		if errors.Is(err, pgx.ErrNoRows) {
			log.Warn("replay run is gone; stopping")
			return errStop
		}
		if err != nil {
			return fmt.Errorf("replay: read run: %w", err)
		}
		if run.State != StateRunning || run.JobID == nil || *run.JobID != job.ID {
			log.Info("replay run is not this job's to work; stopping", zap.String("state", string(run.State)))
			return errStop
		}
		rows, err := w.store.ReplayTx(ctx, tx, client, &run.Selection, run.CursorID, run.Batch, w.config.QueueFor)
		if err != nil {
			return err
		}
		n, rate = len(rows), run.Rate
		if n == 0 {
			if err := w.advance(ctx, tx, job, `state = 'done', finished_at = now()`, run.CursorID, 0); err != nil {
				return err
			}
			log.Info("replay run done", zap.Int64("replayed", run.Replayed), zap.Int64("total", run.Total))
			return nil
		}
		if err := w.advance(ctx, tx, job, `state = state`, rows[n-1].ID, n); err != nil {
			return err
		}
		log.Info("replay progress", zap.Int64("replayed", run.Replayed+int64(n)), zap.Int64("total", run.Total),
			zap.Int64("cursor_id", rows[n-1].ID))
		return nil
	})
	if err == nil && n == 0 {
		return 0, 0, errStop
	}
	return n, rate, err
}

// advance moves the run's cursor and count in tx, if the run is still
// running with this job: else (cancelled while the batch ran) it returns
// errStop, which rolls the batch back.
func (w *Worker) advance(ctx context.Context, tx pgx.Tx, job *river.Job[Args], set string, cursor int64, n int) error {
	tag, err := tx.Exec(ctx, `
UPDATE hookinbox_replay SET `+set+`, cursor_id = $3, replayed = replayed + $4, updated_at = now()
WHERE id = $1 AND state = 'running' AND river_job_id = $2`, job.Args.RunID, job.ID, cursor, n)
	if err != nil {
		return fmt.Errorf("replay: advance run: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errStop
	}
	return nil
}

// handOver enqueues the run's next job and makes it the run's, unless the
// run stopped meanwhile.
func (w *Worker) handOver(ctx context.Context, client *river.Client[pgx.Tx], job *river.Job[Args], log *zap.Logger) error {
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		res, err := client.InsertTx(ctx, tx, Args{RunID: job.Args.RunID}, &river.InsertOpts{Queue: job.Queue, MaxAttempts: MaxAttemptsDefault})
		if err != nil {
			return fmt.Errorf("replay: enqueue next job: %w", err)
		}
		tag, err := tx.Exec(ctx, `UPDATE hookinbox_replay SET river_job_id = $3, updated_at = now()
WHERE id = $1 AND state = 'running' AND river_job_id = $2`, job.Args.RunID, job.ID, res.Job.ID)
		if err != nil {
			return fmt.Errorf("replay: hand over run: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return errStop
		}
		log.Debug("replay run handed to its next job", zap.Int64("next_job_id", res.Job.ID))
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// pace waits until n rows at rate per second have taken their time since
// start.
func pace(ctx context.Context, start time.Time, n, rate int) error {
	if rate <= 0 || n == 0 {
		return nil
	}
	wait := time.Until(start.Add(time.Duration(n) * time.Second / time.Duration(rate)))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
