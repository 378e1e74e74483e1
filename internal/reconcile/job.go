package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
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
	// Fetcher lists its provider's events.
	Fetcher Fetcher
	// Interval is how often it is reconciled.
	Interval time.Duration
	// Lookback is the window each run lists: events created in the last
	// Lookback. It should exceed Interval, so that windows overlap.
	Lookback time.Duration
}

// Worker works Args jobs. It claims through an inboxstore.Ingester built on the
// River client that runs it, so the claimed events' jobs are inserted in
// the claim's transaction.
type Worker struct {
	river.WorkerDefaults[Args]

	pool     *pgxpool.Pool
	sources  map[string]*Source
	queueFor func(string) string
	logger   *zap.Logger
	now      func() time.Time
}

// NewWorker returns the worker of the given sources' reconciliation jobs.
func NewWorker(pool *pgxpool.Pool, sources []*Source, queueFor func(string) string, logger *zap.Logger) *Worker {
	m := make(map[string]*Source, len(sources))
	for _, s := range sources {
		m[s.Name] = s
	}
	return &Worker{pool: pool, sources: m, queueFor: queueFor, logger: logger, now: time.Now}
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
					// One run per source at a time, whichever replica leads.
					UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
						rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled,
					}},
				}
			},
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	return jobs
}

// Work reconciles one source.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	src := w.sources[job.Args.Source]
	if src == nil {
		return river.JobCancel(fmt.Errorf("reconcile: source %q has no reconciliation configured here", job.Args.Source))
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	ingester := inboxstore.NewIngester(w.pool, client, &inboxstore.IngesterConfig{QueueFor: w.queueFor})
	start := w.now()
	res, err := Run(ctx, &Params{
		Source: src.Name, Provider: src.Provider, Fetcher: src.Fetcher, Since: start.Add(-src.Lookback), Claimer: ingester,
	})
	log := w.logger.With(zap.String("source", src.Name), zap.Int("fetched", res.Fetched), zap.Int("new", res.New),
		zap.Int("duplicates", res.Duplicates), zap.Int("twins", res.Twins), zap.Duration("took", time.Since(start)))
	if err != nil {
		log.Warn("reconciliation failed", zap.Error(err))
		return err
	}
	if res.New > 0 {
		log.Warn("reconciliation found events the webhooks missed")
	} else {
		log.Info("reconciled")
	}
	return nil
}
