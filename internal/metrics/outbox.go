package metrics

import (
	"cmp"
	"context"
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
	store   *relay.Store
	config  OutboxBacklogConfig
	reading cachedReading[outboxReading]
}

// outboxReading is one reading of the outbox's messages and destinations.
type outboxReading struct {
	backlog  []relay.Backlog
	disabled []relay.DisabledDestination
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
	now := b.config.Now()
	r, ok := b.reading.get(now, b.config.Cache, b.config.Logger, "the outbox", b.read)
	if !ok {
		return
	}
	counts := map[[2]string]int64{}
	disabled := map[string]float64{}
	for _, d := range b.config.Destinations {
		counts[[2]string{d, string(outbox.StatusPending)}] = 0
		counts[[2]string{d, string(outbox.StatusFailed)}] = 0
		disabled[d] = 0
	}
	for _, row := range r.backlog {
		counts[[2]string{row.Destination, string(row.Status)}] = row.Count
		if row.Status == outbox.StatusPending {
			ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, max(0, now.Sub(row.Oldest).Seconds()), row.Destination)
		}
	}
	for key, n := range counts {
		ch <- prometheus.MustNewConstMetric(outboxMessagesDesc, prometheus.GaugeValue, float64(n), key[0], key[1])
	}
	for _, d := range r.disabled {
		disabled[d.Name] = 1
	}
	for name, v := range disabled {
		ch <- prometheus.MustNewConstMetric(outboxDisabledDesc, prometheus.GaugeValue, v, name)
	}
}

// read takes one reading of the outbox.
func (b *OutboxBacklog) read(ctx context.Context) (outboxReading, error) {
	backlog, err := b.store.Backlog(ctx)
	if err != nil {
		return outboxReading{}, err
	}
	disabled, err := b.store.Disabled(ctx)
	return outboxReading{backlog: backlog, disabled: disabled}, err
}
