package reconcile

import (
	"context"
	"errors"
	"fmt"
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

// Worker works Args jobs. It claims through an inboxstore.Ingester built on the
// River client that runs it, so the claimed events' jobs are inserted in
// the claim's transaction.
type Worker struct {
	river.WorkerDefaults[Args]

	pool       *pgxpool.Pool
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
		pool: pool, sources: m, queueFor: config.QueueFor, logger: config.Logger, metrics: config.Metrics,
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

// Work reconciles one source: from its watermark (less its lookback) to
// now; when the run finishes, the watermark moves to the run's start. A run
// that fails (the provider down past the retries) leaves it, so the next
// run lists the same window again; one the provider rate limits (a
// RateLimitedError) leaves it too and snoozes the job until the limit's
// end, logging when.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	src := w.sources[job.Args.Source]
	if src == nil {
		return river.JobCancel(fmt.Errorf("reconcile: source %q has no reconciliation configured here", job.Args.Source))
	}
	start := w.now()
	mark, ok, err := w.watermarks.Get(ctx, src.Name)
	if err != nil {
		return err
	}
	from := since(start, mark, ok, src.Lookback, src.Window)
	res, err := w.run(ctx, src, from)
	log := w.logger.With(zap.String("source", src.Name), zap.Time("since", from), zap.Int("fetched", res.Fetched),
		zap.Int("new", res.New), zap.Int("duplicates", res.Duplicates), zap.Int("twins", res.Twins),
		zap.Duration("took", time.Since(start)))
	if src.GitHub != nil {
		log = log.With(zap.Int("redelivered", res.Redelivered), zap.Strings("abandoned", res.Abandoned))
	}
	w.metrics.Run(src.Name, res.Fetched, res.New, res.Duplicates, res.Twins, res.Redelivered, len(res.Abandoned), err == nil)
	var limited *RateLimitedError
	if errors.As(err, &limited) {
		// Rescheduled, not failed: a snooze spends no attempt, and the
		// watermark stays for the run at the reset.
		log.Warn("reconciliation rate limited; the watermark stays and the run is rescheduled",
			zap.String("call", limited.Call), zap.Time("retry_at", limited.Until))
		return river.JobSnooze(max(limited.Until.Sub(w.now()), time.Second))
	}
	if err != nil {
		log.Warn("reconciliation failed; the watermark stays", zap.Error(err))
		return err
	}
	if err := w.watermarks.Advance(ctx, src.Name, start); err != nil {
		return err
	}
	w.metrics.Watermark(src.Name, start)
	switch {
	case len(res.Abandoned) > 0:
		log.Error("reconciliation gave up on deliveries the provider redelivered in vain; see the source's rejection samples")
	case res.New > 0 || res.Redelivered > 0:
		log.Warn("reconciliation found events the webhooks missed")
	default:
		log.Info("reconciled")
	}
	return nil
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

// run reconciles src once from since.
func (w *Worker) run(ctx context.Context, src *Source, since time.Time) (*Result, error) {
	if src.GitHub != nil {
		return src.GitHub.Reconcile(ctx, since, Known(inboxstore.New(w.pool), src.Name))
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return &Result{}, err
	}
	ingester := inboxstore.NewIngester(w.pool, client, &inboxstore.IngesterConfig{QueueFor: w.queueFor})
	return Run(ctx, &Params{Source: src.Name, Provider: src.Provider, Fetcher: src.Fetcher, Since: since, Claimer: ingester})
}
