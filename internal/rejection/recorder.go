package rejection

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/component"
)

// The defaults NewRecorder applies to a zero RecorderConfig field, and
// Keep's bound, pkg/component's.
const (
	// KeepDefault is RecorderConfig.Keep's default.
	KeepDefault = component.RecorderKeepDefault
	// SampleBurstDefault is RecorderConfig.SampleBurst's default.
	SampleBurstDefault = component.RecorderSampleBurstDefault
	// SampleEveryDefault is RecorderConfig.SampleEvery's default.
	SampleEveryDefault = component.RecorderSampleEveryDefault
	// KeepMax is the most samples RecorderConfig.Keep may ask for.
	KeepMax = component.RecorderKeepMax
	// queueSize bounds the samples waiting for the writer.
	queueSize = 64
)

// RecorderConfig configures a Recorder, declared in pkg/component so that
// pkg/config names a public type; WithDefaults and Validate are there.
type RecorderConfig = component.RecorderConfig

// Recorder samples the receiver's refusals into the Store in the
// background (see the package doc for its bounds).
type Recorder struct {
	store    *Store
	config   RecorderConfig
	redactor *Redactor
	buckets  map[string]*bucket // fixed at construction: one per source
	queue    chan *Sample

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// bucket is one source's token bucket.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewRecorder returns a started Recorder writing to store. Stop it with
// Stop.
func NewRecorder(store *Store, config *RecorderConfig) *Recorder {
	c := *config.WithDefaults()
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	r := &Recorder{
		store: store, config: c, redactor: NewRedactor(c.Secrets), buckets: make(map[string]*bucket, len(c.Sources)),
		queue: make(chan *Sample, queueSize), stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, s := range c.Sources {
		r.buckets[s] = &bucket{tokens: float64(c.SampleBurst)}
	}
	go r.write()
	return r
}

// Record samples one refusal: it returns at once, and reports whether the
// refusal was queued for writing (false: an unknown source, the source's
// rate spent, or the writer's queue full). headers are redacted here,
// before anything leaves the request's goroutine.
func (r *Recorder) Record(source, reason string, status int, remoteAddr, requestID string, headers http.Header) bool {
	b := r.buckets[source]
	if b == nil || !b.take(r.config.Now(), float64(r.config.SampleBurst), r.config.SampleEvery) {
		return false
	}
	s := &Sample{
		Source: source, RejectedAt: r.config.Now(), Reason: reason, Status: status,
		RemoteAddr: cut(remoteAddr, maxHeaderName), RequestID: cut(requestID, maxHeaderName), Headers: r.redactor.Headers(headers),
	}
	select {
	case r.queue <- s:
		return true
	default:
		return false
	}
}

// take spends a token if one is left, refilling one per every since last.
func (b *bucket) take(now time.Time, burst float64, every time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(burst, b.tokens+float64(now.Sub(b.last))/float64(every))
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (r *Recorder) write() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			// What is queued (at most queueSize samples) is written before
			// Stop returns.
			for {
				select {
				case s := <-r.queue:
					r.insert(s)
				default:
					return
				}
			}
		case s := <-r.queue:
			r.insert(s)
		}
	}
}

func (r *Recorder) insert(s *Sample) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.store.Insert(ctx, s, r.config.Keep); err != nil {
		r.config.Logger.Warn("could not record a rejection sample", zap.String("source", s.Source), zap.Error(err))
	}
}

// Stop writes the samples still queued and stops the writer. Idempotent.
func (r *Recorder) Stop() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
}
