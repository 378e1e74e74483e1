package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reconcile is the reconciliation jobs' metrics.
type Reconcile struct {
	runs      *prometheus.CounterVec
	events    *prometheus.CounterVec
	watermark *prometheus.GaugeVec
}

// NewReconcile registers the reconciliation metrics on reg.
func NewReconcile(reg prometheus.Registerer) *Reconcile {
	m := &Reconcile{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "reconcile", Name: "runs_total",
			Help: "Reconciliation runs, by source and result (ok, failed, rate_limited: rescheduled to the limit's end).",
		}, []string{"source", "result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "reconcile", Name: "events_total",
			Help: "Events (GitHub: deliveries) reconciliation listed, by source and outcome (fetched, new, duplicate, twin, redelivered, abandoned).",
		}, []string{"source", "outcome"}),
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "reconcile", Name: "watermark_timestamp_seconds",
			Help: "Start of the source's last reconciliation run that finished, in unix seconds.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.runs, m.events, m.watermark)
	return m
}

// Run records one run of source's reconciliation, its result (ok, failed,
// rate_limited) and what it counted.
func (m *Reconcile) Run(source string, fetched, added, duplicates, twins, redelivered, abandoned int, result string) {
	if m == nil {
		return
	}
	for outcome, n := range map[string]int{
		"fetched": fetched, "new": added, "duplicate": duplicates, "twin": twins, "redelivered": redelivered, "abandoned": abandoned,
	} {
		m.events.WithLabelValues(source, outcome).Add(float64(n))
	}
	m.runs.WithLabelValues(source, result).Inc()
}

// Watermark records source's new watermark.
func (m *Reconcile) Watermark(source string, at time.Time) {
	if m == nil {
		return
	}
	m.watermark.WithLabelValues(source).Set(float64(at.UnixNano()) / 1e9)
}
