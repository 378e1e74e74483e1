package relay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// The defaults New applies to zero fields (pkg/outbox's, where the
// configuration types are declared).
const (
	// BatchDefault is Config.Batch's default.
	BatchDefault = outbox.BatchDefault
	// LeaseDefault is Config.Lease's default.
	LeaseDefault = outbox.LeaseDefault
	// PollIntervalDefault is Config.PollInterval's default.
	PollIntervalDefault = outbox.PollIntervalDefault
	// ConcurrencyDefault is DestinationConfig.Concurrency's default.
	ConcurrencyDefault = outbox.ConcurrencyDefault
	// MaxAttemptsDefault is DestinationConfig.MaxAttempts's default.
	MaxAttemptsDefault = outbox.MaxAttemptsDefault
	// BackoffMinDefault is DestinationConfig.BackoffMin's default.
	BackoffMinDefault = outbox.BackoffMinDefault
	// BackoffMaxDefault is DestinationConfig.BackoffMax's default.
	BackoffMaxDefault = outbox.BackoffMaxDefault
	// notifyChannel is the channel Enqueue's trigger notifies at commit.
	notifyChannel = "hookinbox_outbox"
)

// DestinationConfig is a destination as the relay delivers to it, declared
// in pkg/outbox so that worker.Config and pkg/config name a public type.
type DestinationConfig = outbox.DestinationConfig

// Config configures a Relay, declared in pkg/outbox (RelayConfig) so that
// worker.Config and pkg/config name a public type.
type Config = outbox.RelayConfig

// The outcomes of a delivery attempt, as Config.Observe is told them.
const (
	// OutcomeDelivered is an attempt the destination acknowledged.
	OutcomeDelivered = "delivered"
	// OutcomeRetried is a failed attempt after which the message is due
	// again.
	OutcomeRetried = "retried"
	// OutcomeFailed is a failed attempt after which the message is failed
	// for good (attempts exhausted, or a permanent answer).
	OutcomeFailed = "failed"
	// OutcomeDisabled is an attempt answered 410 Gone: the destination is
	// disabled until an operator enables it.
	OutcomeDisabled = "disabled"
)

// Relay delivers the outbox's messages: one loop per destination claims its
// due messages, delivers them under the destination's concurrency cap and
// rate, and marks each delivered or due again. Several relays (one per
// worker replica) share the work without claiming a message twice.
type Relay struct {
	store  *Store
	pool   *pgxpool.Pool
	config Config
	loops  []*destinationLoop

	stopOnce  sync.Once
	closeOnce sync.Once
	stop      chan struct{}
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// New returns a Relay on pool; Start starts it.
func New(pool *pgxpool.Pool, config *Config) (*Relay, error) {
	c := *config.WithDefaults()
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Observe == nil {
		c.Observe = func(string, string) {}
	}
	if c.Batch < 0 || c.Lease < 0 || c.PollInterval < 0 {
		return nil, errors.New("outbox: Batch, Lease and PollInterval must not be negative")
	}
	r := &Relay{store: NewStore(pool), pool: pool, config: c, stop: make(chan struct{})}
	for _, name := range slices.Sorted(maps.Keys(c.Destinations)) {
		d := *c.Destinations[name].WithDefaults()
		if d.Destination == nil {
			return nil, fmt.Errorf("outbox: destination %q has no Destination", name)
		}
		if d.Concurrency < 0 || d.MaxAttempts < 0 || d.Rate < 0 || d.BackoffMax < d.BackoffMin {
			return nil, fmt.Errorf("outbox: destination %q: negative Concurrency, MaxAttempts or Rate, or BackoffMax below BackoffMin", name)
		}
		r.loops = append(r.loops, &destinationLoop{
			relay: r, name: name, d: d, wake: make(chan struct{}, 1),
			logger: c.Logger.With(zap.String("destination", name)),
		})
	}
	return r, nil
}

// Start starts the destinations' loops, and the listener unless PollOnly.
// It returns at once.
func (r *Relay) Start(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	for _, l := range r.loops {
		r.wg.Go(func() { l.run(runCtx) })
	}
	if !r.config.PollOnly && len(r.loops) > 0 {
		r.wg.Go(func() { r.listen(runCtx) })
	}
	return nil
}

// Stop stops claiming, lets the deliveries in flight finish until ctx is
// done, then cancels them (their messages are due again at once) and waits
// for the loops to return. It then closes the destinations that have a
// Close method (a NATS connection). Stop is idempotent.
func (r *Relay) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() { close(r.stop) })
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.cancel()
		<-done
	}
	if r.cancel != nil {
		r.cancel()
	}
	r.closeOnce.Do(func() {
		for _, l := range r.loops {
			if c, ok := l.d.Destination.(interface{ Close() }); ok {
				c.Close()
			}
		}
	})
	return nil
}

// wakeAll wakes every destination loop that is waiting.
func (r *Relay) wakeAll() {
	for _, l := range r.loops {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// listen LISTENs on a connection of its own and wakes the loops at each
// notification; when the connection fails it tries again every
// PollInterval (the loops poll meanwhile).
func (r *Relay) listen(ctx context.Context) {
	for {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.config.Logger.Warn("outbox relay: LISTEN failed; polling until it is back", zap.Error(err))
		select {
		case <-r.stop:
			return
		case <-time.After(r.config.PollInterval):
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	pooled, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection never goes back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	r.wakeAll() // What was notified before the LISTEN.
	listenCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-listenCtx.Done():
		}
	}()
	for {
		if _, err := conn.WaitForNotification(listenCtx); err != nil {
			if listenCtx.Err() != nil {
				return nil
			}
			return err
		}
		r.wakeAll()
	}
}

// destinationLoop claims and delivers one destination's messages.
type destinationLoop struct {
	relay  *Relay
	name   string
	d      DestinationConfig
	wake   chan struct{}
	logger *zap.Logger

	mu          sync.Mutex
	failures    int       // consecutive failed deliveries
	pausedUntil time.Time // no delivery starts before it
	disabled    bool      // a 410 disabled the destination during this batch
	nextStart   time.Time // the rate cap's next slot
}

func (l *destinationLoop) run(ctx context.Context) {
	r := l.relay
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		wait := r.config.PollInterval
		if pause := time.Until(l.paused()); pause > 0 {
			wait = pause
		} else {
			n, err := l.batch(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				l.logger.Warn("outbox relay: claim failed", zap.Error(err))
			case err == nil && n == r.config.Batch:
				continue // There may be more.
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-r.stop:
			timer.Stop()
			return
		case <-l.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (l *destinationLoop) paused() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pausedUntil
}

// batch claims one batch and delivers it; it returns the batch's size.
func (l *destinationLoop) batch(ctx context.Context) (int, error) {
	r := l.relay
	recs, err := r.store.Claim(ctx, l.name, r.config.Batch, r.config.Lease)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	l.mu.Lock()
	l.disabled = false
	l.mu.Unlock()
	sem := make(chan struct{}, l.d.Concurrency)
	var wg sync.WaitGroup
	for _, rec := range recs {
		if !l.awaitSlot(ctx) {
			l.release(ctx, rec, 0)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			l.deliver(ctx, rec)
		})
	}
	wg.Wait()
	return len(recs), nil
}

// awaitSlot waits for the rate cap's next slot; false when the relay stops
// meanwhile.
func (l *destinationLoop) awaitSlot(ctx context.Context) bool {
	if l.d.Rate <= 0 {
		return true
	}
	l.mu.Lock()
	now := time.Now()
	start := now
	if l.nextStart.After(now) {
		start = l.nextStart
	}
	l.nextStart = start.Add(time.Duration(float64(time.Second) / l.d.Rate))
	l.mu.Unlock()
	if !start.After(now) {
		return true
	}
	timer := time.NewTimer(start.Sub(now))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-l.relay.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// deliver delivers one claimed message and records the outcome.
func (l *destinationLoop) deliver(ctx context.Context, rec *outbox.Record) {
	l.mu.Lock()
	disabled, pause := l.disabled, time.Until(l.pausedUntil)
	l.mu.Unlock()
	switch {
	case disabled:
		l.release(ctx, rec, 0)
		return
	case pause > 0:
		l.release(ctx, rec, pause)
		return
	}
	err := l.d.Destination.Deliver(ctx, rec)
	if ctx.Err() != nil {
		// A hard stop cut the delivery short: whether it arrived is
		// unknown, so it is sent again, and the attempt does not count.
		l.release(context.WithoutCancel(ctx), rec, 0)
		return
	}
	store := l.relay.store
	if err == nil {
		l.mu.Lock()
		l.failures = 0
		l.mu.Unlock()
		if err := store.MarkDelivered(ctx, rec); err != nil {
			l.logger.Warn("outbox relay: delivered, but the mark failed; it will be sent again", zap.String("key", rec.Key), zap.Error(err))
		}
		l.relay.config.Observe(l.name, OutcomeDelivered)
		return
	}
	l.logger.Warn("outbox relay: delivery failed", zap.String("key", rec.Key), zap.Int("attempt", rec.Attempts), zap.Error(err))
	kind, after := classify(err)
	var markErr error
	switch kind {
	case outcomeDisable:
		l.mu.Lock()
		l.disabled = true
		l.mu.Unlock()
		if err := store.Disable(ctx, l.name, err.Error()); err != nil {
			l.logger.Error("outbox relay: could not disable the destination", zap.Error(err))
		}
		l.logger.Error("outbox relay: destination disabled; `inboxctl outbox enable` enables it", zap.Error(err))
		markErr = store.Release(ctx, rec, 0)
		l.relay.config.Observe(l.name, OutcomeDisabled)
	case outcomePermanent:
		markErr = store.MarkRetry(ctx, rec, err, 0, true)
		l.relay.config.Observe(l.name, OutcomeFailed)
	default:
		delay := l.backoff(rec.Attempts)
		if kind == outcomeRetryAfter {
			delay = min(max(after, 0), l.d.BackoffMax)
		}
		l.mu.Lock()
		l.failures++
		pause := l.backoff(l.failures)
		if kind == outcomeRetryAfter {
			pause = delay
		}
		if until := time.Now().Add(pause); until.After(l.pausedUntil) {
			l.pausedUntil = until
		}
		l.mu.Unlock()
		failed := rec.Attempts >= l.d.MaxAttempts
		markErr = store.MarkRetry(ctx, rec, err, delay, failed)
		observed := OutcomeRetried
		if failed {
			observed = OutcomeFailed
		}
		l.relay.config.Observe(l.name, observed)
	}
	if markErr != nil {
		l.logger.Warn("outbox relay: could not record a failed delivery", zap.String("key", rec.Key), zap.Error(markErr))
	}
}

func (l *destinationLoop) release(ctx context.Context, rec *outbox.Record, delay time.Duration) {
	if err := l.relay.store.Release(ctx, rec, delay); err != nil {
		l.logger.Warn("outbox relay: could not release a message; it is due again when its lease ends", zap.String("key", rec.Key), zap.Error(err))
	}
}

// backoff is the wait after the n-th failure: BackoffMin doubled n-1 times,
// capped at BackoffMax, its second half random.
func (l *destinationLoop) backoff(n int) time.Duration {
	d := l.d.BackoffMin
	for i := 1; i < n && d < l.d.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, l.d.BackoffMax)
	half := d / 2
	return half + rand.N(half+1) //nolint:gosec // jitter, not a secret
}
