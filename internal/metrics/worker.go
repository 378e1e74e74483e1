package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a worker's run of an event, the values of the outcome
// label of hookinbox_worker_events_total.
const (
	// OutcomeDone is an event whose handlers committed (or that had nothing
	// left to do).
	OutcomeDone = "done"
	// OutcomeRetried is a failed run River runs again with backoff.
	OutcomeRetried = "retried"
	// OutcomeFailed is a run after which the event is failed for good
	// (attempts exhausted, or a permanent error).
	OutcomeFailed = "failed"
)

// Worker is the worker's metrics.
type Worker struct {
	events   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	age      *prometheus.HistogramVec
	limit    prometheus.Gauge
}

// NewWorker registers the worker's metrics on reg.
func NewWorker(reg prometheus.Registerer) *Worker {
	m := &Worker{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "worker", Name: "events_total",
			Help: "Event runs, by source and outcome (done, retried, failed).",
		}, []string{"source", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "worker", Name: "handler_duration_seconds",
			Help:    "Time of one run of an event (its transaction and handlers), by source.",
			Buckets: durationBuckets,
		}, []string{"source"}),
		age: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "worker", Name: "event_age_seconds",
			Help:    "Time from an event's job being enqueued (the receiver's commit, for its first job) to its run ending done, by source.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400},
		}, []string{"source"}),
		limit: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "worker", Name: "transaction_limit",
			Help: "How many group transactions the worker runs at once now: its adaptive limit, lowered when the database's latency rises.",
		}),
	}
	reg.MustRegister(m.events, m.duration, m.age, m.limit)
	return m
}

// Event records one run of an event of source that ended with outcome
// (one of OutcomeDone, OutcomeRetried, OutcomeFailed) after took; age is the
// event's age when it ended done, and is ignored for other outcomes.
func (m *Worker) Event(source, outcome string, took, age time.Duration) {
	if m == nil {
		return
	}
	// The counter last: a scrape that counts the run sees its histograms.
	m.duration.WithLabelValues(source).Observe(took.Seconds())
	if outcome == OutcomeDone {
		m.age.WithLabelValues(source).Observe(age.Seconds())
	}
	m.events.WithLabelValues(source, outcome).Inc()
}

// TransactionLimit records the worker's adaptive limit on its group
// transactions.
func (m *Worker) TransactionLimit(n int) {
	if m == nil {
		return
	}
	m.limit.Set(float64(n))
}
