package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/limiter"
	"github.com/hookinbox/hookinbox/internal/logging"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/replay"
	"github.com/hookinbox/hookinbox/internal/retention"
)

// The defaults New applies to a zero Config field.
const (
	// ConcurrencyDefault is the concurrency of the one queue worked when
	// Config.Queues is empty: River's jobs in flight, which cost no
	// connection (the group transactions hold those), and enough of them
	// that River's fetches keep a storm's groups full (see
	// docs/performance.md).
	ConcurrencyDefault = 1000
	// maxAttemptsDefault is Config.MaxAttempts's default.
	maxAttemptsDefault = 10
	// JobTimeoutDefault is Config.JobTimeout's default.
	JobTimeoutDefault = time.Minute
	// RescueAfterMarginDefault is added to Config.JobTimeout to give
	// Config.RescueAfter's default.
	RescueAfterMarginDefault = 30 * time.Second
	// FetchCooldownDefault is Config.FetchCooldown's default.
	FetchCooldownDefault = 10 * time.Millisecond
	// FetchPollIntervalDefault is Config.FetchPollInterval's default.
	FetchPollIntervalDefault = time.Second
	// reaperIntervalDefault is Config.ReaperInterval's default.
	reaperIntervalDefault = time.Minute
	// orphanAfterDefault is Config.OrphanAfter's default.
	orphanAfterDefault = 5 * time.Minute
	// softStopTimeoutDefault is Config.SoftStopTimeout's default.
	softStopTimeoutDefault = 20 * time.Second
	// groupMaxEventsDefault is Config.GroupMaxEvents's default:
	// GroupMaxEventsAdvised. Groups form only while events queue for a
	// transaction: a lone event still runs in a transaction of its own,
	// and a storm's events share one COMMIT by fifty.
	groupMaxEventsDefault = GroupMaxEventsAdvised
	// GroupMaxEventsAdvised is the largest group advised: under
	// PostgreSQL's cache of 64 subtransactions per backend, past which
	// every snapshot in the server slows down.
	GroupMaxEventsAdvised = 50
	// groupLingerDefault is how long a group waits, after its first job,
	// for more jobs to queue before a free flusher takes it. River starts
	// the jobs of one fetch together, and they reach the worker within a
	// moment of each other: without the wait, idle flushers take them one
	// at a time and groups hardly form.
	groupLingerDefault = 2 * time.Millisecond
	// groupLockTimeoutDefault is the longest a group transaction waits for
	// a lock another transaction holds before the waiting event and the
	// rest of its group are worked alone (see Config.GroupMaxEvents). Far
	// below PostgreSQL's deadlock_timeout (1 s), so that groups never wait
	// for the deadlock detector.
	groupLockTimeoutDefault = 20 * time.Millisecond
	// groupSliceDivisor shares a group's time out: an event's handlers in a
	// group get Config.JobTimeout divided by it before the event leaves
	// the group to be worked alone (see workGroup): 6s of the default 1m.
	groupSliceDivisor = 10
	// pruneIntervalDefault is Config.PruneInterval's default.
	pruneIntervalDefault = time.Hour
	// riverConnsDefault is how many of the pool's connections are left to
	// River (its fetches, its completer, its LISTEN connection, its leader's
	// maintenance) and the worker's own bookkeeping (the routes record, the
	// pause watch): event transactions never take them (see inTx).
	riverConnsDefault = 4
)

// Config configures a Worker. Its tagged fields are the worker: section of
// the YAML configuration (pkg/config composes them with the daemon's own
// keys); the others are set in code by whoever builds the Worker. Each
// field's default is in its doc comment; WithDefaults applies them.
type Config struct {
	// Queues maps each River queue this worker works to its concurrency.
	// Defaults to {"default": 1000}.
	Queues map[string]int `mapstructure:"-"`
	// MaxAttempts is how many times an event's handlers run before the event
	// is failed for good. Defaults to 10. The worker's value decides: the
	// receiver and inboxctl stamp theirs on the jobs they enqueue, and the
	// worker aligns each job with its own before running it.
	MaxAttempts int `mapstructure:"max_attempts"`
	// JobTimeout bounds one run of an event's handlers. In a group, an
	// event's handlers get a tenth of it, and one that needs longer leaves
	// the group to run alone with the half of it that is left, so that a
	// slow event never spends its neighbours' time. Defaults to 1m.
	JobTimeout time.Duration `mapstructure:"job_timeout"`
	// RescueAfter is how long a job may stay running before River rescues
	// it (its worker died). Must exceed JobTimeout. Defaults to JobTimeout+30s.
	RescueAfter time.Duration `mapstructure:"rescue_after"`
	// FetchCooldown is the least time between two fetches of a queue while
	// jobs keep arriving. River's own default (100ms) caps a queue at about
	// ten fetches a second, which starves fast handlers. Defaults to 10ms.
	FetchCooldown time.Duration `mapstructure:"fetch_cooldown"`
	// FetchPollInterval is how often an idle queue polls for jobs when no
	// LISTEN notification arrives. Defaults to 1s.
	FetchPollInterval time.Duration `mapstructure:"fetch_poll_interval"`
	// ReaperInterval is how often the reaper looks for orphaned pending
	// rows. Defaults to 1m.
	ReaperInterval time.Duration `mapstructure:"reaper_interval"`
	// OrphanAfter is how long a row may stay pending without a live job
	// before the reaper re-enqueues it. Defaults to 5m.
	OrphanAfter time.Duration `mapstructure:"orphan_after"`
	// PruneInterval is how often the retention job applies the sources'
	// retention and payload_retention. Defaults to 1h.
	PruneInterval time.Duration `mapstructure:"prune_interval"`
	// PruneBatch is how many rows one retention statement deletes or
	// erases, each batch a short transaction of its own. Defaults to 1000.
	PruneBatch int `mapstructure:"prune_batch"`
	// GroupMaxEvents caps the events worked in one transaction: jobs
	// fetched together share a transaction, each event's handlers in a
	// savepoint of their own, and one COMMIT. How many group transactions
	// run at once adapts to the database's latency (see
	// internal/limiter), so that a storm's drain leaves the receiver room;
	// groups grow while they wait. 1 gives each event a transaction of its
	// own, with no such limit; either way the event transactions open at
	// once are bounded by the pool's size. Defaults to 50
	// (GroupMaxEventsAdvised).
	GroupMaxEvents int `mapstructure:"group_max_events"`
	// SoftStopTimeout is how long a stopping worker lets running jobs
	// finish before cancelling them. Defaults to 20s.
	SoftStopTimeout time.Duration `mapstructure:"soft_stop_timeout"`
	// SynchronousCommit makes each event's COMMIT wait for the WAL flush.
	// Defaults to false, on purpose: a worker's commit lost in a crash of
	// PostgreSQL or a failover loses the effect and the done mark together,
	// so the event runs again (at the reaper's next pass once its job ended
	// after the outage, or once River's rescuer takes the job back when the
	// outage lost its end: see docs/operations.md) and nothing is applied
	// twice. The receiver's claim is always durable, because its 2xx
	// promises it.
	SynchronousCommit bool `mapstructure:"synchronous_commit"`
	// Isolation is the isolation level of the handler transactions of a
	// route that chooses none: read_committed, repeatable_read or
	// serializable. Defaults to read_committed. A level other than
	// read_committed gives each event a transaction of its own (no group
	// commit); serialization failures and deadlocks are run again at once.
	Isolation Isolation `mapstructure:"isolation"`
	// PauseRefresh is how often the worker reads the paused sources; a
	// pause takes effect within it, for every event whose handlers have not
	// begun, fetched or not. Defaults to 1s.
	PauseRefresh time.Duration `mapstructure:"pause_refresh"`
	// HeartbeatInterval is how often the worker renews its record of the
	// routes it runs on each queue (see Start). A record not renewed for
	// three intervals is dead: a worker that died holds a route change back
	// that long, and one that cannot reach the database begins no event
	// from a third of an interval before then. Defaults to 10s.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// UnroutedDone marks an event no route matches done with a note. By
	// default such an event is failed with the reason, loudly: a failed row
	// can be replayed once the routes are fixed, a done one never is.
	UnroutedDone bool `mapstructure:"-"`
	// PollOnly makes River poll for jobs every FetchPollInterval, and for
	// leadership, instead of LISTENing for them: a LISTEN needs a session of
	// its own, which a transaction pooler (PgBouncer's pool_mode =
	// transaction) does not give. Defaults to false.
	PollOnly bool `mapstructure:"-"`
	// Routes map events to handlers; the first match decides. New refuses
	// routes that leave a source on a worked queue without a route.
	Routes []Route `mapstructure:"routes"`
	// Sources maps every source's name to its queue, the queue the receiver
	// enqueues its events on. Required: it is what New checks Routes
	// against, and where the reaper re-enqueues a source's jobs.
	Sources map[string]string `mapstructure:"-"`
	// Registry resolves the routes' handler names. Defaults to the built-ins.
	Registry *Registry `mapstructure:"-"`
	// QueueFor names the queue of a source's jobs when the reaper re-enqueues
	// them. Defaults to the source's queue in Sources, else River's default
	// queue.
	QueueFor func(source string) string `mapstructure:"-"`
	// GroupFlushers is how many group transactions run at once, each on a
	// connection of its own; River's worker count (Queues) is how many
	// events are in flight, which may be far more. Defaults to the pool's
	// size less riverConnsDefault, and at least 1. The event transactions
	// open at once, a group's or an event's own, are bounded by the same
	// number (at least 2) whatever this is.
	GroupFlushers int `mapstructure:"-"`
	// Retention are the sources' retention policies, applied by a periodic
	// job every PruneInterval (see RetentionPolicy). Empty runs no such job.
	Retention []RetentionPolicy `mapstructure:"-"`
	// Logger defaults to a no-op logger.
	Logger *zap.Logger `mapstructure:"-"`
	// Metrics, when set, is where New registers the worker's event metrics
	// (hookinbox_worker_*), which count each run of an event. nil counts
	// nothing.
	Metrics prometheus.Registerer `mapstructure:"-"`
	// AddWorkers, when set, registers further River workers (a worker
	// binary's own jobs, reconciliation) on the client's bundle.
	AddWorkers func(*river.Workers) `mapstructure:"-"`
	// PeriodicJobs are further periodic jobs (reconciliation), run by
	// whichever worker is River's leader.
	PeriodicJobs []*river.PeriodicJob `mapstructure:"-"`
	// TracerProvider, when set, traces each job (River's otelriver
	// middleware, linked to the span of the delivery that enqueued it) and
	// each event's handlers (see tracing.go). nil traces nothing.
	TracerProvider trace.TracerProvider `mapstructure:"-"`
	// Outbox, when set, runs an outbox relay (internal/relay) in the worker,
	// started by Start and stopped by Stop: it delivers the messages
	// handlers enqueue (the forward handler's among them) to these
	// destinations. Its PollOnly is forced on with the worker's. nil runs
	// none: another worker delivers them.
	Outbox *relay.Config `mapstructure:"-"`
	// RiverConfig, when set, receives the river.Config before the client is
	// built, for settings this Config does not cover (tests shorten River's
	// timings with it).
	RiverConfig func(*river.Config) `mapstructure:"-"`
}

// WithDefaults returns a copy of c with every zero-valued setting (the
// tagged fields) at its documented default. It is idempotent; pkg/config
// applies it to the worker: section, New to its Config.
func (c *Config) WithDefaults() *Config {
	out := *c
	out.MaxAttempts = cmp.Or(out.MaxAttempts, maxAttemptsDefault)
	out.JobTimeout = cmp.Or(out.JobTimeout, JobTimeoutDefault)
	out.RescueAfter = cmp.Or(out.RescueAfter, out.JobTimeout+RescueAfterMarginDefault)
	out.FetchCooldown = cmp.Or(out.FetchCooldown, FetchCooldownDefault)
	out.FetchPollInterval = cmp.Or(out.FetchPollInterval, FetchPollIntervalDefault)
	out.ReaperInterval = cmp.Or(out.ReaperInterval, reaperIntervalDefault)
	out.OrphanAfter = cmp.Or(out.OrphanAfter, orphanAfterDefault)
	out.PruneInterval = cmp.Or(out.PruneInterval, pruneIntervalDefault)
	out.PruneBatch = cmp.Or(out.PruneBatch, retention.BatchDefault)
	out.GroupMaxEvents = cmp.Or(out.GroupMaxEvents, groupMaxEventsDefault)
	out.SoftStopTimeout = cmp.Or(out.SoftStopTimeout, softStopTimeoutDefault)
	out.Isolation = cmp.Or(out.Isolation, isolationDefault)
	out.PauseRefresh = cmp.Or(out.PauseRefresh, pauseRefreshDefault)
	out.HeartbeatInterval = cmp.Or(out.HeartbeatInterval, heartbeatIntervalDefault)
	return &out
}

// withRuntimeDefaults is WithDefaults plus the defaults of the fields set in
// code.
func (c *Config) withRuntimeDefaults() *Config {
	out := c.WithDefaults()
	if len(out.Queues) == 0 {
		out.Queues = map[string]int{river.QueueDefault: ConcurrencyDefault}
	}
	if out.Logger == nil {
		out.Logger = zap.NewNop()
	}
	if out.Registry == nil {
		out.Registry = NewRegistry(out.Logger)
	}
	if out.QueueFor == nil {
		sources := out.Sources
		out.QueueFor = func(source string) string { return cmp.Or(sources[source], river.QueueDefault) }
	}
	return out
}

// Validate checks the settings (the tagged fields) of a Config that
// WithDefaults filled, and returns every problem found, each an error that
// starts with its key in the worker: section ("max_attempts: must be
// positive"), joined. pkg/config reports them under "worker."; New runs it.
func (c *Config) Validate() error {
	var errs []error
	positive := func(key string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", key))
		}
	}
	positive("max_attempts", int64(c.MaxAttempts))
	positive("job_timeout", int64(c.JobTimeout))
	positive("fetch_cooldown", int64(c.FetchCooldown))
	positive("fetch_poll_interval", int64(c.FetchPollInterval))
	positive("rescue_after", int64(c.RescueAfter))
	if c.RescueAfter > 0 && c.JobTimeout > 0 && c.RescueAfter <= c.JobTimeout {
		errs = append(errs, fmt.Errorf("rescue_after: must exceed worker.job_timeout (%s), or River rescues jobs still running", c.JobTimeout))
	}
	positive("reaper_interval", int64(c.ReaperInterval))
	positive("orphan_after", int64(c.OrphanAfter))
	if _, err := ParseIsolation(string(c.Isolation)); err != nil {
		errs = append(errs, fmt.Errorf("isolation: %w", err))
	}
	positive("group_max_events", int64(c.GroupMaxEvents))
	positive("soft_stop_timeout", int64(c.SoftStopTimeout))
	positive("prune_interval", int64(c.PruneInterval))
	positive("prune_batch", int64(c.PruneBatch))
	positive("pause_refresh", int64(c.PauseRefresh))
	positive("heartbeat_interval", int64(c.HeartbeatInterval))
	for i := range c.Routes {
		errs = append(errs, c.Routes[i].validate(fmt.Sprintf("routes[%d]", i), c.Isolation, c.Routes[:i]))
	}
	return errors.Join(errs...)
}

// validate is Validate and the checks of the fields set in code.
func (c *Config) validate() error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if c.GroupFlushers < 0 {
		return errors.New("worker: GroupFlushers must not be negative")
	}
	for q, n := range c.Queues {
		if n <= 0 {
			return fmt.Errorf("worker: queue %q needs a positive concurrency", q)
		}
	}
	for i, r := range c.Routes {
		if c.Outbox != nil {
			for _, d := range r.Destinations {
				if _, ok := c.Outbox.Destinations[d]; !ok {
					return fmt.Errorf("worker: route %d: unknown destination %q", i, d)
				}
			}
		}
	}
	if len(c.Sources) == 0 {
		return errors.New("worker: Sources is empty; the worker needs every source's queue to check its routes")
	}
	return nil
}

// Worker is a River client working inbox events and the reaper.
type Worker struct {
	client       *river.Client[pgx.Tx]
	config       *Config
	registration *registration
	group        *groupCommitter  // nil without group commit
	limit        *limiter.Limiter // the group transactions' limit; nil without group commit
	pauses       *pauseWatch
	relay        *relay.Relay // nil without Config.Outbox
	// stopping is set once the worker stops River's client (stopWork), and
	// shared with the event worker (see eventWorker.stopping).
	stopping *atomic.Bool

	state atomic.Int32 // a State
	// mu serialises the changes of state and the starts and stops of the
	// work (River's client, the group committer, the relay).
	mu          sync.Mutex
	working     bool  // the work started
	workStopped bool  // the work was stopped (a worker never works again)
	stopErr     error // the stop's error: jobs may still run
	stopped     bool  // Stop was called: later calls return stopErr
	// The rollout loop (see rollout.go): stopRollout stops it, rolloutDone
	// is closed when it returned. nil before the first claim.
	stopRollout, rolloutDone chan struct{}
	// waitingFor and waitingLogged throttle the waiting log (under mu).
	waitingFor    string
	waitingLogged time.Time
	// fenceSeen is whether the worker was fenced at its last renewal
	// (rollout's goroutine alone; see logFence).
	fenceSeen bool
	// queueLost: a reclaim found another route set on the worker's queues
	// and deleted its records; it drains (the rollout loop's alone).
	queueLost bool
}

// New builds a Worker on pool. It refuses routes that leave a source on a
// worked queue without a route, and logs checkRoutes' warnings.
func New(pool *pgxpool.Pool, config *Config) (*Worker, error) {
	c := config.withRuntimeDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	warnings, err := checkRoutes(c.Routes, c.Sources, slices.Sorted(maps.Keys(c.Queues)))
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		c.Logger.Warn(w)
	}
	router, err := newRouter(c.Routes, c.Registry)
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	store := inboxstore.New(pool)
	pauses := newPauseWatch(store, c.PauseRefresh, c.Logger.Named("pause"))
	registration := newRegistration(pool, c)
	// The connections the pool has for event transactions, each a group's
	// (a flusher's) or an event's own: the rest is River's and the
	// worker's own bookkeeping's (the routes record, the pause watch). At
	// least two, so that an event waiting alone for a lock leaves one.
	conns := max(2, int(pool.Config().MaxConns)-riverConnsDefault)
	flushers := cmp.Or(c.GroupFlushers, max(1, int(pool.Config().MaxConns)-riverConnsDefault))
	var wm *metrics.Worker // nil counts nothing
	if c.Metrics != nil {
		wm = metrics.NewWorker(c.Metrics)
	}
	ew := &eventWorker{
		pool: pool, store: store, router: router, failUnrouted: !c.UnroutedDone, asyncCommit: !c.SynchronousCommit, isolation: c.Isolation, logger: c.Logger,
		metrics: wm, pauses: pauses, sources: c.Sources, maxAttempts: c.MaxAttempts, queueFor: c.QueueFor,
		jobTimeout: c.JobTimeout, groupSettings: groupSettings(c.JobTimeout), registration: registration,
		slots: make(chan struct{}, conns), stopping: new(atomic.Bool),
	}
	if c.TracerProvider != nil {
		ew.tracer = c.TracerProvider.Tracer(tracerName)
	}
	if c.GroupMaxEvents > 1 {
		worked := 0
		for source := range c.Sources {
			if _, ok := c.Queues[c.QueueFor(source)]; ok {
				worked++
			}
		}
		ew.group = newGroupCommitter(ew, flushers, c.GroupMaxEvents, groupLingerDefault, c.Queues, worked)
	}
	river.AddWorker(workers, ew)
	river.AddWorker(workers, &reaper{pool: pool, store: store, orphanAfter: c.OrphanAfter, stallAfter: min(c.OrphanAfter, c.ReaperInterval),
		sequenceOf: router.sequenceOf, queueFor: c.QueueFor, queues: sourceQueues(c.Sources, c.QueueFor), logger: c.Logger.Named("reaper")})
	// A bulk replay hands its run to a new job well before the job timeout.
	river.AddWorker(workers, replay.NewWorker(pool, &replay.WorkerConfig{
		QueueFor: c.QueueFor, Slice: min(replay.SliceDefault, c.JobTimeout/2), Logger: c.Logger.Named("replay"),
	}))
	policies := make([]retention.Policy, len(c.Retention))
	for i, p := range c.Retention {
		policies[i] = retention.Policy(p)
	}
	pruner := retention.NewPruner(store, &retention.Config{Policies: policies, Batch: c.PruneBatch, Logger: c.Logger.Named("retention")})
	river.AddWorker(workers, &pruneWorker{pruner: pruner})
	if c.AddWorkers != nil {
		c.AddWorkers(workers)
	}

	queues := make(map[string]river.QueueConfig, len(c.Queues))
	for q, n := range c.Queues {
		queues[q] = river.QueueConfig{MaxWorkers: n}
	}
	rc := &river.Config{
		JobTimeout:           c.JobTimeout,
		RescueStuckJobsAfter: c.RescueAfter,
		MaxAttempts:          c.MaxAttempts,
		FetchCooldown:        c.FetchCooldown,
		FetchPollInterval:    c.FetchPollInterval,
		PollOnly:             c.PollOnly,
		Logger:               logging.Slog(c.Logger.Named("river")),
		Queues:               queues,
		Workers:              workers,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(c.ReaperInterval),
				func() (river.JobArgs, *river.InsertOpts) {
					return reaperArgs{}, &river.InsertOpts{Queue: firstQueue(c.Queues), MaxAttempts: 1}
				},
				&river.PeriodicJobOpts{RunOnStart: true}),
		},
	}
	if len(c.Retention) > 0 {
		rc.PeriodicJobs = append(rc.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(c.PruneInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return pruneArgs{}, &river.InsertOpts{Queue: firstQueue(c.Queues), MaxAttempts: 1}
			},
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	rc.PeriodicJobs = append(rc.PeriodicJobs, c.PeriodicJobs...)
	if c.TracerProvider != nil {
		rc.Plugins = append(rc.Plugins, jobTracing(c.TracerProvider))
	}
	if c.RiverConfig != nil {
		c.RiverConfig(rc)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("worker: river client: %w", err)
	}
	w := &Worker{client: client, config: c, registration: registration, group: ew.group, limit: ew.limit, pauses: pauses, stopping: ew.stopping}
	if c.Outbox != nil {
		rc := *c.Outbox
		rc.PollOnly = rc.PollOnly || c.PollOnly
		if rc.Logger == nil {
			rc.Logger = c.Logger.Named("outbox")
		}
		if w.relay, err = relay.New(pool, &rc); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// sourceQueues maps each source to its current queue, as queueFor names it.
func sourceQueues(sources map[string]string, queueFor func(string) string) map[string]string {
	out := make(map[string]string, len(sources))
	for s := range sources {
		out[s] = queueFor(s)
	}
	return out
}

// firstQueue picks a stable queue for the reaper: "default" when worked.
func firstQueue(queues map[string]int) string {
	if _, ok := queues[river.QueueDefault]; ok {
		return river.QueueDefault
	}
	first := ""
	for q := range queues {
		if first == "" || q < first {
			first = q
		}
	}
	return first
}

// Start starts fetching and working jobs. It returns at once.
//
// First it records the routes it runs on each of its queues
// (hookinbox_worker_routes, renewed every HeartbeatInterval, deleted by
// Stop). Workers sharing a queue must share its routes, or each would settle
// events the other has the handlers for; so a queue is only ever worked by
// one route set at a time, and a route change rolls out by itself:
//
//   - A worker that finds a live worker working one of its queues with other
//     routes takes nothing: it records its routes as waiting, stays in
//     StateWaiting (not ready), says why in its log, and Start returns nil.
//   - A working worker that sees a newer route set (one that started after
//     it) waiting on one of its queues drains (StateDraining): River's soft
//     stop lets its running jobs finish, it fetches no new ones, and its
//     maintenance (reaper, replay, retention, reconciliation, the outbox
//     relay, all run by its River client or beside it) stops with it. Then
//     it deletes its record and stays in StateRetired, working nothing,
//     until it is stopped. It never works again: no ping-pong.
//   - The waiting worker takes over (StateWorking) within about a second of
//     the last worker with other routes deleting its record (or of that
//     record expiring, three HeartbeatIntervals after its worker died).
//
// "Newer" is by start, so a rollback (the earlier routes, started later)
// rolls out the same way. Of two route sets waiting, the newer one wins.
//
// When River's client fails to start (the database refused a connection:
// every one may be taken), Start returns its error and leaves the rest
// running, so that Start may be called again; Stop ends it all.
//
// Event transactions, a group's or an event's own, take at most the pool's
// size less riverConnsDefault connections at once, so that the records'
// claims and renewals and the pause watch always find one, however many
// events are in flight. A worker whose records could not be renewed for
// nearly their ttl fences itself: it begins and commits no event until a
// renewal lands, so that it never works once its records may have expired
// (see registration.fenced).
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pauses.stop == nil {
		if err := w.pauses.start(ctx); err != nil {
			return fmt.Errorf("worker: read paused sources: %w", err)
		}
	}
	if w.stopRollout == nil {
		blocker, err := w.registration.claim(ctx)
		if err != nil {
			// The pause watch goes on: Start may be called again, and it
			// starts the watch only once; Stop ends it.
			return err
		}
		w.stopRollout, w.rolloutDone = make(chan struct{}), make(chan struct{})
		go w.rollout(context.WithoutCancel(ctx), w.stopRollout, w.rolloutDone)
		if blocker != nil {
			w.setState(StateWaiting)
			w.waiting(blocker)
			return nil
		}
		w.setState(StateWorking)
	}
	if w.State() != StateWorking {
		return nil
	}
	return w.startWork(ctx)
}

// startWork, called with w.mu held, starts the group committer, River's
// client and the relay.
func (w *Worker) startWork(ctx context.Context) error {
	if w.working || w.workStopped {
		return nil
	}
	if w.group != nil {
		w.group.Start()
	}
	if err := w.client.Start(ctx); err != nil {
		return err
	}
	if w.relay != nil {
		if err := w.relay.Start(ctx); err != nil {
			return err
		}
	}
	w.working = true
	return nil
}

// Client returns the worker's River client, for River UI's endpoints.
func (w *Worker) Client() *river.Client[pgx.Tx] { return w.client }

// Stop stops the worker: a soft stop lets running jobs finish within
// SoftStopTimeout; then their contexts are cancelled (a hard stop) and Stop
// waits until ctx is done for them to return. Jobs cut short run again.
// Then it deletes the worker's routes record.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return w.stopErr
	}
	w.stopped = true
	w.setState(StateStopped)
	err := w.stopWork(ctx)
	w.mu.Unlock()
	if w.stopRollout != nil {
		select {
		case <-w.stopRollout:
		default:
			close(w.stopRollout)
		}
		<-w.rolloutDone
	}
	w.pauses.shutdown()
	if err != nil {
		// Jobs may still run: the record is left to expire.
		return err
	}
	if w.stopRollout == nil {
		return nil
	}
	return w.registration.delete(ctx, w.config.Logger)
}

// stopWork, called with w.mu held, stops River's client, then the relay and
// the group committer. Calls after the first do nothing.
func (w *Worker) stopWork(ctx context.Context) error {
	if w.workStopped {
		return w.stopErr
	}
	w.workStopped = true
	w.stopping.Store(true)
	if w.stopErr = w.stopClient(ctx); w.stopErr != nil {
		return w.stopErr
	}
	if w.relay != nil {
		// After the handlers: what they enqueued last is delivered if
		// ctx leaves time; the rest waits, pending, for the next relay.
		_ = w.relay.Stop(ctx)
	}
	if w.group != nil {
		// No Work runs any more: every queued job was answered.
		w.group.Stop()
	}
	return nil
}

func (w *Worker) stopClient(ctx context.Context) error {
	softCtx, cancel := context.WithTimeout(ctx, w.config.SoftStopTimeout)
	defer cancel()
	err := w.client.Stop(softCtx)
	if err == nil {
		return nil
	}
	w.config.Logger.Warn("soft stop timed out; cancelling running jobs", zap.Error(err))
	if err := w.client.StopAndCancel(ctx); err != nil {
		return fmt.Errorf("worker: hard stop: %w", err)
	}
	return nil
}
