package metrics

import (
	"cmp"
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// DurabilityConfig configures a Durability collector.
type DurabilityConfig struct {
	// Read reads what a 2xx survives (inboxstore.ReadDurability on the
	// process's pool). Required.
	Read func(ctx context.Context) (*inboxstore.Durability, error)
	// Cache is how long one reading answers scrapes. Defaults to
	// BacklogCacheDefault (5s).
	Cache time.Duration
	// Logger logs a failed reading. Defaults to a no-op logger.
	Logger *zap.Logger
}

// Durability is a prometheus.Collector that says, when scraped, what a 2xx
// survives on the server the process reaches now (a failover may change
// it), reading the server's settings at most once per Cache. A failed
// reading exports nothing (the series go stale) and logs why.
type Durability struct {
	config  DurabilityConfig
	reading cachedReading[*inboxstore.Durability]
}

// NewDurability returns a Durability collector.
func NewDurability(config *DurabilityConfig) *Durability {
	c := *config
	c.Cache = cmp.Or(c.Cache, BacklogCacheDefault)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return &Durability{config: c}
}

var ackSurvivesDesc = prometheus.NewDesc(namespace+"_ack_survives",
	"1 when an acknowledged (2xx) delivery survives the failure on the server reached now, else 0, by failure: "+
		"process_crash, server_crash (fsync and full_page_writes on), server_loss (a synchronous standby). See `inboxctl doctor`.",
	[]string{"failure"}, nil)

// Describe implements prometheus.Collector.
func (d *Durability) Describe(ch chan<- *prometheus.Desc) { ch <- ackSurvivesDesc }

// Collect implements prometheus.Collector.
func (d *Durability) Collect(ch chan<- prometheus.Metric) {
	r, ok := d.reading.get(time.Now(), d.config.Cache, d.config.Logger, "the server's durability settings", d.config.Read)
	if !ok {
		return
	}
	for _, v := range r.Verdicts() {
		value := 0.0
		if v.Survives {
			value = 1
		}
		ch <- prometheus.MustNewConstMetric(ackSurvivesDesc, prometheus.GaugeValue, value, v.Failure)
	}
}
