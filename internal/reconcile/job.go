package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/metrics"
)

// JobKind is the River job kind of a source's reconciliation.
const JobKind = "hookinbox.reconcile"

// Args are a reconciliation job's arguments: one source.
type Args struct {
	Source string `json:"source"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return JobKind }

// Source is one source to reconcile.
type Source struct {
	// Name and Provider name the source.
	Name, Provider string
	// Fetcher lists its provider's events, which the run claims (Stripe,
	// Paddle, Square). Nil when GitHub is set.
	Fetcher Fetcher
	// GitHub asks GitHub to redeliver the deliveries the inbox lacks. Nil
	// when Fetcher is set.
	GitHub *GitHub
	// Interval is how often it is reconciled.
	Interval time.Duration
	// Lookback is the overlap of each run's window: it lists from the
	// previous finished run's start (the watermark) less Lookback, or from
	// Lookback ago when none finished.
	Lookback time.Duration
	// Window is how far back the provider lists or redelivers; no run lists
	// from earlier. Zero means no bound.
	Window time.Duration
}

// Worker works Args jobs, and runs a source's reconciliation on demand
// (RunSource, inboxctl reconcile) the same way. It claims through an
// inboxstore.Ingester built on the River client that runs it (or
// WorkerConfig.Client), so the claimed events' jobs are inserted in the
// claim's transaction.
type Worker struct {
	river.WorkerDefaults[Args]

	pool       *pgxpool.Pool
	client     *river.Client[pgx.Tx]
	sources    map[string]*Source
	queueFor   func(string) string
	logger     *zap.Logger
	metrics    *metrics.Reconcile
	watermarks *Watermarks
	now        func() time.Time
}

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Sources are the sources reconciled.
	Sources []*Source
	// QueueFor names each source's event queue.
	QueueFor func(string) string
	// Client inserts the claimed events' jobs; it may be insert-only.
	// Defaults to the River client that works the job (from its context);
	// RunSource outside a job needs it.
	Client *river.Client[pgx.Tx]
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Metrics counts each run. nil counts nothing.
	Metrics *metrics.Reconcile
	// Now defaults to time.Now.
	Now func() time.Time
}

// NewWorker returns the worker of the given sources' reconciliation jobs.
func NewWorker(pool *pgxpool.Pool, config *WorkerConfig) *Worker {
	m := make(map[string]*Source, len(config.Sources))
	for _, s := range config.Sources {
		m[s.Name] = s
	}
	w := &Worker{
		pool: pool, client: config.Client, sources: m, queueFor: config.QueueFor, logger: config.Logger, metrics: config.Metrics,
		watermarks: NewWatermarks(pool), now: config.Now,
	}
	if w.logger == nil {
		w.logger = zap.NewNop()
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w
}

// PeriodicJobs returns a periodic job per source, each on queue.
func PeriodicJobs(sources []*Source, queue string) []*river.PeriodicJob {
	jobs := make([]*river.PeriodicJob, 0, len(sources))
	for _, s := range sources {
		name := s.Name
		jobs = append(jobs, river.NewPeriodicJob(river.PeriodicInterval(s.Interval),
			func() (river.JobArgs, *river.InsertOpts) {
				return Args{Source: name}, &river.InsertOpts{
					Queue: queue, MaxAttempts: 3,
					// One job per source at a time, whichever replica leads;
					// the source's lock (RunSource) keeps a manual run out too.
					UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
						rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled,
					}},
				}
			},
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	return jobs
}

// busyWait is how long a job whose source another run holds is snoozed.
const busyWait = time.Minute

// Work reconciles one source from its watermark (less its lookback) to now
// (RunSource). A run that fails (the provider down past the retries) leaves
// the watermark, so the next run lists the same window again; one the
// provider rate limits (a RateLimitedError) leaves it too and snoozes the
// job until the limit's end, and one that finds the source's run in
// progress (ErrRunning: inboxctl reconcile) snoozes a minute; a snooze
// spends no attempt.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	_, err := w.RunSource(ctx, job.Args.Source, &RunParams{})
	var limited *RateLimitedError
	switch {
	case errors.Is(err, ErrNotReconciled):
		return river.JobCancel(err)
	case errors.Is(err, ErrRunning):
		w.logger.Info("reconciliation already running; rescheduled", zap.String("source", job.Args.Source),
			zap.Time("retry_at", w.now().Add(busyWait)))
		return river.JobSnooze(busyWait)
	case errors.As(err, &limited):
		return river.JobSnooze(max(limited.Until.Sub(w.now()), time.Second))
	}
	return err
}

// Known returns the lookup GitHub.Reconcile needs: whether store holds
// source's event eventID.
func Known(store *inboxstore.Store, source string) func(ctx context.Context, eventID string) (bool, error) {
	return func(ctx context.Context, eventID string) (bool, error) {
		_, err := store.Lookup(ctx, source, eventID)
		if errors.Is(err, inboxstore.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
}
