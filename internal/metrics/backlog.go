package metrics

import (
	"cmp"
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// BacklogCacheDefault is BacklogConfig.Cache's default.
const BacklogCacheDefault = 5 * time.Second

// BacklogConfig configures a Backlog collector.
type BacklogConfig struct {
	// Cache is how long one reading of the database answers scrapes, so
	// that several replicas scraped every 15s cost a few queries, not one
	// per scrape. Defaults to 5s.
	Cache time.Duration
	// Sources are the configured sources: each has a backlog series per
	// status, 0 when it has no such row, so that a drained backlog reads 0
	// rather than vanishing.
	Sources []string
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger logs a failed reading. Defaults to a no-op logger.
	Logger *zap.Logger
}

// Backlog is a prometheus.Collector that reads the inbox's pending (split
// into claimable and held, see inboxstore.Store.Backlog) and failed rows and River's unfinished jobs from the database when scraped,
// at most once per Cache. A failed reading exports nothing of it (the
// series go stale) and sets hookinbox_backlog_up to 0.
type Backlog struct {
	store   *inboxstore.Store
	config  BacklogConfig
	reading cachedReading[backlogReading]
}

// backlogReading is one reading of the inbox's backlog and River's queues.
type backlogReading struct {
	backlog []inboxstore.Backlog
	depths  []inboxstore.QueueDepth
}

// NewBacklog returns a Backlog collector reading through store.
func NewBacklog(store *inboxstore.Store, config *BacklogConfig) *Backlog {
	c := *config
	c.Cache = cmp.Or(c.Cache, BacklogCacheDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return &Backlog{store: store, config: c}
}

var (
	backlogEventsDesc = prometheus.NewDesc(namespace+"_inbox_backlog_events",
		"Inbox rows not done, by source and status: pending (claimable), held (pending, but held, of a paused source, or parked behind its sequence key), failed.", []string{"source", "status"}, nil)
	backlogOldestDesc = prometheus.NewDesc(namespace+"_inbox_oldest_pending_age_seconds",
		"Age of the oldest claimable pending inbox row (not held, source not paused), by source; absent when a source has none.", []string{"source"}, nil)
	riverJobsDesc = prometheus.NewDesc(namespace+"_river_jobs",
		"River's unfinished jobs (every kind), by queue and state (available, scheduled, retryable, running, pending).", []string{"queue", "state"}, nil)
	backlogUpDesc = prometheus.NewDesc(namespace+"_backlog_up",
		"1 when the last reading of the backlog from the database succeeded, else 0.", nil, nil)
)

// Describe implements prometheus.Collector.
func (b *Backlog) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogEventsDesc
	ch <- backlogOldestDesc
	ch <- riverJobsDesc
	ch <- backlogUpDesc
}

// Collect implements prometheus.Collector.
func (b *Backlog) Collect(ch chan<- prometheus.Metric) {
	now := b.config.Now()
	r, ok := b.reading.get(now, b.config.Cache, b.config.Logger, "the backlog", b.read)
	if !ok {
		ch <- prometheus.MustNewConstMetric(backlogUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogUpDesc, prometheus.GaugeValue, 1)
	counts := map[[2]string]int64{}
	for _, source := range b.config.Sources {
		counts[[2]string{source, string(inbox.StatusPending)}] = 0
		counts[[2]string{source, string(inboxstore.BacklogHeld)}] = 0
		counts[[2]string{source, string(inbox.StatusFailed)}] = 0
	}
	for _, row := range r.backlog {
		counts[[2]string{row.Source, string(row.Status)}] = row.Count
	}
	for key, n := range counts {
		ch <- prometheus.MustNewConstMetric(backlogEventsDesc, prometheus.GaugeValue, float64(n), key[0], key[1])
	}
	for _, row := range r.backlog {
		if row.Status == inbox.StatusPending {
			ch <- prometheus.MustNewConstMetric(backlogOldestDesc, prometheus.GaugeValue, max(0, now.Sub(row.Oldest).Seconds()), row.Source)
		}
	}
	for _, d := range r.depths {
		ch <- prometheus.MustNewConstMetric(riverJobsDesc, prometheus.GaugeValue, float64(d.Count), d.Queue, d.State)
	}
}

// read takes one reading of the backlog.
func (b *Backlog) read(ctx context.Context) (backlogReading, error) {
	backlog, err := b.store.Backlog(ctx)
	if err != nil {
		return backlogReading{}, err
	}
	depths, err := b.store.QueueDepths(ctx)
	return backlogReading{backlog: backlog, depths: depths}, err
}
