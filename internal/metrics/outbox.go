package metrics

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// Outbox is the outbox relay's counter of delivery attempts.
type Outbox struct {
	deliveries *prometheus.CounterVec
}

// NewOutbox registers the relay's counter on reg.
func NewOutbox(reg prometheus.Registerer) *Outbox {
	m := &Outbox{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "outbox", Name: "deliveries_total",
			Help: "Outbox delivery attempts, by destination and outcome (delivered, retried, failed, disabled: a 410 disabled the destination).",
		}, []string{"destination", "outcome"}),
	}
	reg.MustRegister(m.deliveries)
	return m
}

// Delivery counts one attempt; it is relay.Config.Observe.
func (m *Outbox) Delivery(destination, outcome string) {
	m.deliveries.WithLabelValues(destination, outcome).Inc()
}

// OutboxBacklogConfig configures an OutboxBacklog collector.
type OutboxBacklogConfig struct {
	// Cache is how long one reading of the database answers scrapes.
	// Defaults to BacklogCacheDefault (5s).
	Cache time.Duration
	// Destinations are the configured destinations: each has a series per
	// status and a disabled series, 0 when it has none, so that a drained
	// outbox reads 0 rather than vanishing.
	Destinations []string
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger logs a failed reading. Defaults to a no-op logger.
	Logger *zap.Logger
}

// OutboxBacklog is a prometheus.Collector that reads the outbox's pending
// and failed messages and its disabled destinations from the database when
// scraped, at most once per Cache. A failed reading exports none of them
// (the series go stale) and logs why.
type OutboxBacklog struct {
	store  *relay.Store
	config OutboxBacklogConfig

	mu       sync.Mutex
	readAt   time.Time
	backlog  []relay.Backlog
	disabled []relay.DisabledDestination
	ok       bool
}

// NewOutboxBacklog returns an OutboxBacklog collector reading through store.
func NewOutboxBacklog(store *relay.Store, config *OutboxBacklogConfig) *OutboxBacklog {
	c := *config
	c.Cache = cmp.Or(c.Cache, BacklogCacheDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return &OutboxBacklog{store: store, config: c}
}

var (
	outboxMessagesDesc = prometheus.NewDesc(namespace+"_outbox_messages",
		"Outbox messages not delivered, by destination and status (pending, failed: for good, until `inboxctl outbox replay`).", []string{"destination", "status"}, nil)
	outboxOldestDesc = prometheus.NewDesc(namespace+"_outbox_oldest_pending_age_seconds",
		"Age of the oldest pending outbox message, by destination; absent when a destination has none.", []string{"destination"}, nil)
	outboxDisabledDesc = prometheus.NewDesc(namespace+"_outbox_destination_disabled",
		"1 when a 410 Gone disabled the destination (until `inboxctl outbox enable`), else 0.", []string{"destination"}, nil)
)

// Describe implements prometheus.Collector.
func (b *OutboxBacklog) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxMessagesDesc
	ch <- outboxOldestDesc
	ch <- outboxDisabledDesc
}

// Collect implements prometheus.Collector.
func (b *OutboxBacklog) Collect(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.config.Now()
	if b.readAt.IsZero() || now.Sub(b.readAt) >= b.config.Cache {
		b.read()
		b.readAt = now
	}
	if !b.ok {
		return
	}
	counts := map[[2]string]int64{}
	disabled := map[string]float64{}
	for _, d := range b.config.Destinations {
		counts[[2]string{d, string(outbox.StatusPending)}] = 0
		counts[[2]string{d, string(outbox.StatusFailed)}] = 0
		disabled[d] = 0
	}
	for _, r := range b.backlog {
		counts[[2]string{r.Destination, string(r.Status)}] = r.Count
		if r.Status == outbox.StatusPending {
			ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, max(0, now.Sub(r.Oldest).Seconds()), r.Destination)
		}
	}
	for key, n := range counts {
		ch <- prometheus.MustNewConstMetric(outboxMessagesDesc, prometheus.GaugeValue, float64(n), key[0], key[1])
	}
	for _, d := range b.disabled {
		disabled[d.Name] = 1
	}
	for name, v := range disabled {
		ch <- prometheus.MustNewConstMetric(outboxDisabledDesc, prometheus.GaugeValue, v, name)
	}
}

// read refreshes the cache; b.mu is held.
func (b *OutboxBacklog) read() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	backlog, err := b.store.Backlog(ctx)
	if err == nil {
		b.disabled, err = b.store.Disabled(ctx)
	}
	if err != nil {
		b.config.Logger.Warn("could not read the outbox for /metrics", zap.Error(err))
		b.ok = false
		return
	}
	b.backlog, b.ok = backlog, true
}
