package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Delivery is one request of a load run: the event it delivers, and whether
// the generator expects it to be a duplicate (for per-class figures).
type Delivery struct {
	EventID string
	Seq     int64
	Dup     bool
}

// LoadSpec describes a load run against the receiver. A run is bounded both
// in time (Warmup + Duration, plus one request timeout) and in count
// (MaxRequests).
type LoadSpec struct {
	// URL is the receiver's webhook endpoint.
	URL string
	// Clients is the number of concurrent closed-loop clients, or, with
	// Rate set, the most requests in flight at once.
	Clients int
	// Rate, when positive, makes the run open-loop: requests start on a
	// fixed schedule of Rate per second whatever the answers, and latency is
	// measured from each request's scheduled start (no coordinated
	// omission).
	Rate float64
	// Warmup is run but not measured; Duration is the measured window.
	Warmup, Duration time.Duration
	// MaxRequests bounds the requests sent, warm-up included.
	MaxRequests int64
	// Next returns the seq-th request's delivery (seq counts from 0); client
	// is the closed-loop client sending it (0 in an open loop).
	Next func(client int, seq int64) Delivery
	// AckTimeout is the receiver's ack_timeout: answers slower than it are
	// counted. Requests give up at AckTimeout + 5s.
	AckTimeout time.Duration
	// Stop, when closed, ends an open loop's schedule early (the requests
	// in flight finish); nil for never.
	Stop <-chan struct{}
}

// ClassStats are the figures of one class of deliveries (new or duplicate).
type ClassStats struct {
	// Requests counts measured requests of the class; OK those answered 2xx.
	Requests, OK int64
	// Latency holds the measured requests' ack latencies.
	Latency Histogram
}

// LoadResult is what a load run measured. Only requests that started in
// the measured window count, except Sent.
type LoadResult struct {
	// Sent counts every request sent, warm-up included; SentNew the new
	// events their 200 answers reported.
	Sent, SentNew int64
	// Window is the measured time: from the end of the warm-up until the
	// last measured answer.
	Window time.Duration
	// Requests counts measured requests, Status their answers by code,
	// Errors those that got no answer (transport error or client timeout).
	Requests int64
	Status   map[int]int64
	Errors   int64
	// OverAck counts requests answered (or abandoned) more than AckTimeout
	// after they were sent. In an open loop, Latency also counts the wait
	// for a free client before sending; OverAck does not.
	OverAck int64
	// Late counts open-loop requests sent more than 10 ms after their
	// scheduled start because every client was waiting for an answer: the
	// system did not keep up with the rate.
	Late int64
	// New and Duplicates sum the receiver's per-delivery counts in 200
	// answers.
	New, Duplicates int64
	// Latency holds every measured request's ack latency.
	Latency Histogram
	// ByClass splits Requests into new (0) and expected duplicates (1).
	ByClass [2]ClassStats
	// FirstError is the first transport error, for the report.
	FirstError string
}

// OK counts measured requests answered with a 2xx status.
func (r *LoadResult) OK() int64 {
	var n int64
	for code, c := range r.Status {
		if code >= 200 && code <= 299 {
			n += c
		}
	}
	return n
}

// Non2xx counts measured requests answered with a status outside 2xx.
func (r *LoadResult) Non2xx() int64 {
	var n int64
	for _, c := range r.Status {
		n += c
	}
	return n - r.OK()
}

// NewPerSec is the rate of newly accepted events in the measured window.
func (r *LoadResult) NewPerSec() float64 { return perSec(r.New, r.Window) }

// OKPerSec is the rate of 2xx answers in the measured window.
func (r *LoadResult) OKPerSec() float64 { return perSec(r.OK(), r.Window) }

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// newHTTPClient returns a client whose transport keeps a warm connection for
// every concurrent request, so that the run measures the receiver and not
// TCP handshakes.
func newHTTPClient(conns int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          2 * conns,
			MaxIdleConnsPerHost:   2 * conns,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true,
			ResponseHeaderTimeout: timeout,
		},
	}
}

// loadClient is one goroutine's share of a run; merged at the end.
type loadClient struct {
	res  LoadResult
	http *http.Client
	spec *LoadSpec
	buf  bytes.Buffer
}

// loadRun is one run of a LoadSpec in progress.
type loadRun struct {
	spec               *LoadSpec
	clients            []*loadClient
	start, measureFrom time.Time
	end                time.Time // closed loop: no request starts after it
	sent               atomic.Int64
	lastDone           atomic.Int64 // unix nanoseconds of the last measured answer
}

// runLoad runs spec and returns its measurements. It returns early, with
// what it has, when ctx ends.
func runLoad(ctx context.Context, spec *LoadSpec) *LoadResult {
	client := newHTTPClient(spec.Clients, spec.AckTimeout+5*time.Second)
	defer client.CloseIdleConnections()
	l := &loadRun{spec: spec, start: time.Now()}
	l.measureFrom = l.start.Add(spec.Warmup)
	l.end = l.measureFrom.Add(spec.Duration)
	l.clients = make([]*loadClient, spec.Clients)
	for i := range l.clients {
		l.clients[i] = &loadClient{http: client, spec: spec, res: LoadResult{Status: map[int]int64{}}}
	}
	if spec.Rate > 0 {
		l.openLoop(ctx)
	} else {
		l.closedLoop(ctx)
	}
	out := &LoadResult{Sent: l.sent.Load(), Status: map[int]int64{}}
	for _, c := range l.clients {
		out.add(&c.res)
	}
	if last := l.lastDone.Load(); last > 0 {
		out.Window = time.Unix(0, last).Sub(l.measureFrom)
	}
	return out
}

// closedLoop lets every client send its next request as soon as it has
// the answer to the last, until the end or the request bound.
func (l *loadRun) closedLoop(ctx context.Context) {
	var wg sync.WaitGroup
	for i, c := range l.clients {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(l.end) {
				seq := l.sent.Add(1) - 1
				if seq >= l.spec.MaxRequests {
					l.sent.Add(-1)
					return
				}
				now := time.Now()
				c.send(ctx, time.Time{}, l.spec.Next(i, seq), now.Before(l.measureFrom), &l.lastDone)
			}
		})
	}
	wg.Wait()
}

// openLoop starts requests on a fixed schedule of Rate per second for
// Warmup + Duration, handing each to an idle client; a request that finds
// every client busy waits, and that wait counts in its latency.
func (l *loadRun) openLoop(ctx context.Context) {
	type job struct {
		at time.Time
		d  Delivery
	}
	jobs := make(chan job, 4*len(l.clients))
	var wg sync.WaitGroup
	for _, c := range l.clients {
		wg.Go(func() {
			for j := range jobs {
				c.send(ctx, j.at, j.d, j.at.Before(l.measureFrom), &l.lastDone)
			}
		})
	}
	total := min(int64(l.spec.Rate*(l.spec.Warmup+l.spec.Duration).Seconds()), l.spec.MaxRequests)
	interval := time.Duration(float64(time.Second) / l.spec.Rate)
schedule:
	for seq := range total {
		at := l.start.Add(time.Duration(seq) * interval)
		if wait := time.Until(at); wait > 200*time.Microsecond {
			select {
			case <-ctx.Done():
				break schedule
			case <-l.spec.Stop:
				break schedule
			case <-time.After(wait):
			}
		}
		select {
		case <-l.spec.Stop:
			break schedule
		default:
		}
		jobs <- job{at: at, d: l.spec.Next(0, seq)}
		l.sent.Add(1)
	}
	close(jobs)
	wg.Wait()
}

// send delivers d and records the answer, unless warm is set. Latency runs
// from scheduled (an open loop's plan), or, when scheduled is zero (a closed
// loop), from the moment the signed request is ready: building and signing
// it is the load generator's work, not the receiver's.
func (c *loadClient) send(ctx context.Context, scheduled time.Time, d Delivery, warm bool, lastDone *atomic.Int64) {
	req, err := c.request(ctx, d)
	sentAt := time.Now()
	if scheduled.IsZero() {
		scheduled = sentAt
	}
	var (
		code   int
		counts answer
	)
	if err == nil {
		code, counts, err = c.post(req)
	}
	done := time.Now()
	if err == nil && code == http.StatusOK {
		c.res.SentNew += int64(counts.New)
	}
	if warm {
		return
	}
	r := &c.res
	latency := done.Sub(scheduled)
	class := &r.ByClass[0]
	if d.Dup {
		class = &r.ByClass[1]
	}
	r.Requests++
	class.Requests++
	r.Latency.Record(latency)
	class.Latency.Record(latency)
	if sentAt.Sub(scheduled) > 10*time.Millisecond {
		r.Late++
	}
	// The receiver's budget runs from the request's arrival, not from its
	// place in an open loop's schedule.
	if done.Sub(sentAt) > c.spec.AckTimeout {
		r.OverAck++
	}
	storeMax(lastDone, done.UnixNano())
	if err != nil {
		r.Errors++
		if r.FirstError == "" {
			r.FirstError = err.Error()
		}
		return
	}
	r.Status[code]++
	if code >= 200 && code <= 299 {
		class.OK++
		r.New += int64(counts.New)
		r.Duplicates += int64(counts.Duplicates)
	}
}

// answer is the receiver's 200 body.
type answer struct {
	New        int `json:"new"`
	Duplicates int `json:"duplicates"`
}

// request signs d as the provider would, at the moment of sending.
func (c *loadClient) request(ctx context.Context, d Delivery) (*http.Request, error) {
	now := time.Now()
	body := depositBody(d.EventID, d.Seq, 0, now)
	header, err := signedHeaders(d.EventID, body, now)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.spec.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	return req, nil
}

// post sends req and reads the answer.
func (c *loadClient) post(req *http.Request) (int, answer, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, answer{}, err
	}
	defer resp.Body.Close()
	c.buf.Reset()
	if _, err := io.Copy(&c.buf, io.LimitReader(resp.Body, 64<<10)); err != nil {
		return 0, answer{}, fmt.Errorf("read answer: %w", err)
	}
	var a answer
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(c.buf.Bytes(), &a); err != nil {
			return 0, answer{}, fmt.Errorf("decode answer %q: %w", c.buf.Bytes(), err)
		}
	}
	return resp.StatusCode, a, nil
}

// add adds o's measurements to r: another client's share of a run, or
// another slice of an interleaved measurement.
func (r *LoadResult) add(o *LoadResult) {
	if r.Status == nil {
		r.Status = map[int]int64{}
	}
	if r.FirstError == "" {
		r.FirstError = o.FirstError
	}
	r.Sent += o.Sent
	r.Window += o.Window
	r.Requests += o.Requests
	r.SentNew += o.SentNew
	r.Errors += o.Errors
	r.OverAck += o.OverAck
	r.Late += o.Late
	r.New += o.New
	r.Duplicates += o.Duplicates
	r.Latency.Merge(&o.Latency)
	for code, n := range o.Status {
		r.Status[code] += n
	}
	for i := range r.ByClass {
		r.ByClass[i].Requests += o.ByClass[i].Requests
		r.ByClass[i].OK += o.ByClass[i].OK
		r.ByClass[i].Latency.Merge(&o.ByClass[i].Latency)
	}
}
