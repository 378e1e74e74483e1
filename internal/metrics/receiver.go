package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a delivery, the values of the outcome label of
// hookinbox_receiver_deliveries_total.
const (
	// OutcomeAccepted is a delivery answered 2xx after its events were
	// committed (new, duplicate or twin: see hookinbox_receiver_events_total).
	OutcomeAccepted = "accepted"
	// OutcomeHandshake is a verified handshake or health check, answered and
	// never stored.
	OutcomeHandshake = "handshake"
	// OutcomeRejected is a delivery answered with an error; the reason label
	// says why.
	OutcomeRejected = "rejected"
)

// ReasonSourceShare is the reason of a delivery refused (503 with
// Retry-After) because its source held its share of the receiver's
// in-flight slots or of its group commit's queue (receiver.source_share),
// while they were not all taken: that source is storming, and the room
// left is kept for the others.
const ReasonSourceShare = "source_share"

// Receiver is the receiver's and its batcher's metrics.
type Receiver struct {
	deliveries *prometheus.CounterVec
	events     *prometheus.CounterVec
	ack        *prometheus.HistogramVec
	batch      prometheus.Histogram
}

// ReceiverConfig configures a Receiver's gauges, read at each scrape.
type ReceiverConfig struct {
	// InFlight returns the deliveries being handled. Optional.
	InFlight func() int
	// Queued returns the deliveries waiting for a group commit. Optional.
	Queued func() int
}

// NewReceiver registers the receiver's metrics on reg.
func NewReceiver(reg prometheus.Registerer, config *ReceiverConfig) *Receiver {
	m := &Receiver{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "receiver", Name: "deliveries_total",
			Help: "Deliveries answered, by source, outcome (accepted, handshake, rejected) and, for rejected ones, reason; source is empty for an unknown source.",
		}, []string{"source", "outcome", "reason"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "receiver", Name: "events_total",
			Help: "Events of accepted deliveries, by source and outcome: new (claimed), duplicate (event id taken) or twin (twin key taken).",
		}, []string{"source", "outcome"}),
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "receiver", Name: "ack_duration_seconds",
			Help:    "Time from a request's arrival to its 2xx answer, for accepted deliveries, by source.",
			Buckets: durationBuckets,
		}, []string{"source"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "receiver", Name: "batch_events",
			Help:    "Events per group-commit transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
	}
	reg.MustRegister(m.deliveries, m.events, m.ack, m.batch)
	if config.InFlight != nil {
		reg.MustRegister(gaugeFunc("receiver", "in_flight_requests", "Deliveries being handled, from reading the body to the answer.", config.InFlight))
	}
	if config.Queued != nil {
		reg.MustRegister(gaugeFunc("receiver", "batch_queue_deliveries", "Deliveries waiting for a group commit.", config.Queued))
	}
	return m
}

func gaugeFunc(subsystem, name, help string, fn func() int) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help},
		func() float64 { return float64(fn()) })
}

// Delivery counts a delivery answered with outcome (one of the Outcome
// constants); reason is "" unless outcome is OutcomeRejected. source must be
// a configured source's name, or "": never a name taken from the request.
// An accepted delivery's latency feeds the ack histogram.
func (m *Receiver) Delivery(source, outcome, reason string, latency time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(source, outcome, reason).Inc()
	if outcome == OutcomeAccepted {
		m.ack.WithLabelValues(source).Observe(latency.Seconds())
	}
}

// Events counts an accepted delivery's events by what the claim did.
func (m *Receiver) Events(source string, claimed, duplicates, twins int) {
	if m == nil {
		return
	}
	for outcome, n := range map[string]int{"new": claimed, "duplicate": duplicates, "twin": twins} {
		if n > 0 {
			m.events.WithLabelValues(source, outcome).Add(float64(n))
		}
	}
}

// Batch records the events of one group-commit transaction.
func (m *Receiver) Batch(events int) {
	if m == nil {
		return
	}
	m.batch.Observe(float64(events))
}
