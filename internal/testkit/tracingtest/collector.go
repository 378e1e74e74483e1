// Package tracingtest is a fake OpenTelemetry collector for tests: an
// httptest server that speaks OTLP over HTTP (protobuf), decodes each
// export request as the protocol defines it, and keeps what it received.
package tracingtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is a fake OTLP/HTTP traces endpoint.
type Collector struct {
	// URL is the server's root ("http://127.0.0.1:PORT"); a client may
	// POST to any path under it.
	URL string

	mu       sync.Mutex
	requests []Request
}

// Request is one export request the Collector decoded.
type Request struct {
	// Path is the request's URL path.
	Path string
	// Header are the request's headers.
	Header http.Header
	// Services are the service.name of each resource in the request.
	Services []string
	// Spans are the names of the request's spans.
	Spans []string
}

// NewCollector starts a Collector, closed when the test ends.
func NewCollector(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone()}
	for _, rs := range export.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				req.Services = append(req.Services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				req.Spans = append(req.Spans, s.GetName())
			}
		}
	}
	c.mu.Lock()
	c.requests = append(c.requests, req)
	c.mu.Unlock()
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Requests returns the export requests received so far.
func (c *Collector) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

// Spans returns the names of the spans received so far, in order.
func (c *Collector) Spans() []string {
	var names []string
	for _, r := range c.Requests() {
		names = append(names, r.Spans...)
	}
	return names
}
