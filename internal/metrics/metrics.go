// Package metrics holds hookinbox's Prometheus metrics: what the receiver,
// the group-commit batcher and the worker count as they go, and a collector
// that reads the inbox's backlog and River's queue depth from the database
// when scraped, through a short cache.
//
// Every metric is named hookinbox_…, in base units (seconds), with no
// high-cardinality label: source, outcome, reason, status and queue are
// labels, event ids and request ids never are. The methods of a nil
// *Receiver or *Worker do nothing, so that packages count unconditionally.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every metric's name.
const namespace = "hookinbox"

// NewRegistry returns a registry holding the Go runtime's and the process's
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg's metrics in Prometheus's text format, for GET
// /metrics.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// durationBuckets are the buckets of the latency histograms, in seconds:
// from a millisecond to a minute.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
