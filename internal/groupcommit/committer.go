package groupcommit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookinbox/hookinbox/internal/fairshare"
	"github.com/hookinbox/hookinbox/internal/limiter"
)

// ErrOverloaded is Do's error when Config.QueueSize requests wait already:
// the flushes are not keeping up.
var ErrOverloaded = errors.New("groupcommit: queue is full")

// ErrStopped is Do's error once Stop has been called, and the answer of
// every request still waiting for a flusher when it was.
var ErrStopped = errors.New("groupcommit: stopped")

// ErrShare is Do's error when Config.Key is set and the request's key
// holds its Config.Share of the queue slots the other keys leave: the queue
// is not full, but this key may not fill it. It wraps ErrOverloaded.
var ErrShare = fmt.Errorf("%w: the key holds its share of it", ErrOverloaded)

// QueueSizeDefault is Config.QueueSize's default.
const QueueSizeDefault = 1024

// Request is one caller's item in a batch.
type Request[T any] struct {
	// Ctx is the caller's context, for its values (a trace span) and for
	// work done on the caller's behalf alone. A request whose Ctx ended
	// before its batch was flushed is answered with its error and left out.
	Ctx  context.Context
	Item T
}

// Result is one request's answer: what its Do returns.
type Result[R any] struct {
	Value R
	Err   error
}

// Flush handles a batch, typically in one transaction, and returns one
// result per request, in the batch's order; or an error, which answers
// every request of the batch. ctx is the batch's: it has the earliest
// deadline of the requests' contexts, so that the batch ends before any
// of its callers gives up, and with Config.WaitForAnswer it also ends as
// soon as any of their contexts does. A Flush must not keep batch.
type Flush[T, R any] func(ctx context.Context, batch []Request[T]) ([]Result[R], error)

// Config configures a Committer.
type Config[T any] struct {
	// MaxSize caps a batch's size, as Size measures it. A request is never
	// split: the one that reaches the cap joins whole, so a batch may pass
	// it by that request's size. Defaults to 1: a batch per request.
	MaxSize int
	// Size measures an item for MaxSize, at least 1. Defaults to 1 an item.
	Size func(T) int
	// Linger is how long a batch waits after its first request for more
	// before an idle flusher takes it. Defaults to 0: a lone request never
	// waits for company, and batches form while the flushers are busy.
	Linger time.Duration
	// Flushers is the number of batches flushed at once. Defaults to 1.
	Flushers int
	// QueueSize bounds the requests waiting for a flusher (queued, or
	// gathered into the next batch); past it Do returns ErrOverloaded.
	// Defaults to QueueSizeDefault.
	QueueSize int
	// Key, when set, names a request's key (a source): a key may hold at
	// most Share of the queue slots the other keys leave (see package
	// fairshare), past which Do returns ErrShare; and the waiting requests
	// go into batches in turns, one of each key's per turn (first come,
	// first served within a key), so that a key with one request waiting
	// is in the next batch however many another key queued before it; and
	// the last idle flusher is kept for a key that holds none, so that a
	// key's storm leaves one flusher to the others, whose requests then
	// commit in a batch of their own rather than wait for the storm's.
	// Defaults to nil: one queue for all, first come, first served.
	Key func(T) string
	// Share is a key's share of the queue when Key is set: more than 0, at
	// most 1 (no limit but the queue's). Defaults to fairshare.ShareDefault.
	Share float64
	// WaitForAnswer makes Do wait for its request's answer even after its
	// context ended; so that the answer comes soon, a batch's context ends
	// as soon as any of its requests' does. Defaults to false: Do returns
	// its context's error as soon as the context ends, and the batch goes
	// on without that caller, whose leaving must not fail the others.
	WaitForAnswer bool
	// Limiter, when set, bounds the batches flushed at once below
	// Flushers: the collector hands a batch over only with one of the
	// limiter's permits, which the flusher gives back once the batch is
	// flushed. Until a permit is free the batch keeps growing, up to
	// MaxSize, so that a lower limit means fewer, larger batches. Permits
	// are shared with the limiter's other users. Defaults to nil: Flushers
	// batches at once.
	Limiter *limiter.Limiter
}

// Committer runs requests in batches, each through one call of its Flush,
// and answers each caller with its own result. Memory is bounded by
// QueueSize waiting requests and the batches in flight.
type Committer[T, R any] struct {
	flush   Flush[T, R]
	config  Config[T]
	queue   chan *pending[T, R]
	batches chan []*pending[T, R]
	// waiting counts the requests queued or in the collector's next batch.
	waiting atomic.Int64
	// shares holds each key's waiting requests when Config.Key is set.
	shares *fairshare.Budget
	// busy counts the flushers handed a batch and not done with it.
	busy atomic.Int64
	// collected counts the requests the collector has taken in, ever (the
	// tests wait on it: a request counts in waiting before it is queued).
	collected atomic.Int64
	// flushing counts, with Config.Key, each key's batches in the
	// flushers' hands; freed wakes the collector when a flush ends.
	flushingMu sync.Mutex
	flushing   map[string]int
	freed      chan struct{}
	// mu is held shared while Do queues, exclusively while Stop sets
	// stopped: no request is queued after Stop's drain.
	mu      sync.RWMutex
	stopped bool
	stop    chan struct{}
	// leftover is the collector's batch in hand when it stopped.
	leftover  []*pending[T, R]
	wg        sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
}

// pending is a request waiting for its answer.
type pending[T, R any] struct {
	ctx  context.Context
	item T
	size int
	key  string
	// turn is the request's turn in the collector's batch (see turns).
	turn uint64
	done chan Result[R] // buffered: a flusher never blocks on it
}

// New returns a Committer that flushes its batches with flush. It runs
// once Start is called; stop it with Stop.
func New[T, R any](flush Flush[T, R], config *Config[T]) *Committer[T, R] {
	c := *config
	c.MaxSize = max(1, c.MaxSize)
	c.Flushers = max(1, c.Flushers)
	c.QueueSize = cmp.Or(max(0, c.QueueSize), QueueSizeDefault)
	var shares *fairshare.Budget
	if c.Key != nil {
		shares = fairshare.New(c.QueueSize, c.Share)
	}
	return &Committer[T, R]{
		flush: flush, config: c, shares: shares,
		// Never full: waiting bounds what it holds.
		queue:    make(chan *pending[T, R], c.QueueSize),
		batches:  make(chan []*pending[T, R]),
		stop:     make(chan struct{}),
		flushing: map[string]int{},
		freed:    make(chan struct{}, 1),
	}
}

// Start starts the collector and the flushers. Calls after the first do
// nothing.
func (c *Committer[T, R]) Start() {
	c.startOnce.Do(func() {
		c.wg.Add(1 + c.config.Flushers)
		go c.collect()
		for range c.config.Flushers {
			go c.flushLoop()
		}
	})
}

// Stop lets the flushers finish the batches in hand and answers every
// request still waiting with ErrStopped; Do returns ErrStopped from then
// on. Calls after the first do nothing.
func (c *Committer[T, R]) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		close(c.stop)
		c.wg.Wait()
		for _, p := range c.leftover {
			c.answerStopped(p)
		}
		for {
			select {
			case p := <-c.queue:
				c.answerStopped(p)
			default:
				return
			}
		}
	})
}

func (c *Committer[T, R]) answerStopped(p *pending[T, R]) {
	c.dequeued(p)
	p.done <- Result[R]{Err: ErrStopped}
}

// Waiting returns the number of requests waiting for a flusher.
func (c *Committer[T, R]) Waiting() int { return int(c.waiting.Load()) }

// Do queues item for the next batch and waits for its answer. It returns
// ErrOverloaded at once when QueueSize requests wait already, ErrStopped
// once Stop was called, and ctx's error when ctx has ended, or ends while
// the request waits (unless Config.WaitForAnswer). A request whose Do
// returned early may still be flushed, or may not.
func (c *Committer[T, R]) Do(ctx context.Context, item T) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	size := 1
	if c.config.Size != nil {
		size = max(1, c.config.Size(item))
	}
	p := &pending[T, R]{ctx: ctx, item: item, size: size, done: make(chan Result[R], 1)}
	if c.config.Key != nil {
		p.key = c.config.Key(item)
	}
	if err := c.enqueue(p); err != nil {
		return zero, err
	}
	if c.config.WaitForAnswer {
		r := <-p.done
		return r.Value, r.Err
	}
	select {
	case r := <-p.done:
		return r.Value, r.Err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (c *Committer[T, R]) enqueue(p *pending[T, R]) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.stopped {
		return ErrStopped
	}
	if c.shares != nil {
		if err := c.shares.Acquire(p.key); err != nil {
			if errors.Is(err, fairshare.ErrShare) {
				return ErrShare
			}
			return ErrOverloaded
		}
	}
	if c.waiting.Add(1) > int64(c.config.QueueSize) {
		c.waiting.Add(-1)
		if c.shares != nil {
			c.shares.Release(p.key)
		}
		return ErrOverloaded
	}
	c.queue <- p
	return nil
}

// collect gathers queued requests into a batch and hands it to the idle
// flushers. The batch is ready when it is full, or once Linger has passed
// since its first request; until a flusher is free it keeps gathering. A
// ready batch is shared out evenly among the idle flushers: a flush may
// work its requests one after the other (the worker's groups do), and one
// flusher taking everything would leave the others idle. The collector
// takes every queued request at once (Config.QueueSize bounds them), and
// orders them by turns (see turns), so that the head it hands over is
// each key's fair part of what waits.
func (c *Committer[T, R]) collect() {
	defer c.wg.Done()
	var (
		batch  []*pending[T, R]
		size   int
		ripe   bool
		timer  = time.NewTimer(time.Hour)
		expiry <-chan time.Time
		order  turns
	)
	timer.Stop()
	defer timer.Stop()
	add := func(p *pending[T, R]) {
		if len(batch) == 0 {
			if c.config.Linger > 0 {
				timer.Reset(c.config.Linger)
				expiry = timer.C
			} else {
				ripe = true
			}
		}
		head := uint64(0)
		if len(batch) > 0 {
			head = batch[0].turn
		}
		p.turn = order.next(p.key, head)
		// After every request of its turn or an earlier one.
		i, _ := slices.BinarySearchFunc(batch, p.turn+1, func(q *pending[T, R], turn uint64) int {
			return cmp.Compare(q.turn, turn)
		})
		batch = slices.Insert(batch, i, p)
		size += p.size
		c.collected.Add(1)
	}
	l := c.config.Limiter
	held := false // a permit of l for the next batch
	defer func() {
		if held {
			l.Release()
		}
	}()
	for {
		// Take what is queued already, so that a batch handed over is as
		// full, and as fair, as the queue allows.
	drain:
		for {
			select {
			case p := <-c.queue:
				add(p)
			default:
				break drain
			}
		}
		var out chan<- []*pending[T, R]
		var send, rest []*pending[T, R]
		sendSize := 0
		var wake <-chan struct{}
		if len(batch) > 0 && (ripe || size >= c.config.MaxSize) {
			if l != nil && !held {
				// The wake-up first: a permit freed after a failed try
				// closes it.
				wake = l.Wake()
				held = l.TryAcquire()
			}
			if l == nil || held {
				wake = nil
				if send, sendSize, rest = c.share(batch, size, &order); len(send) > 0 {
					out = c.batches
				}
			}
		}
		select {
		case <-c.stop:
			c.leftover = batch
			return
		case p := <-c.queue:
			add(p)
		case <-expiry:
			ripe, expiry = true, nil
		case <-wake:
		case <-c.freed:
		case out <- send:
			held = false // the flusher's now
			c.busy.Add(1)
			c.countFlushing(send, 1)
			size -= sendSize
			for _, p := range send {
				order.sent(p.key)
			}
			// The rest is ready: the next idle flusher takes it.
			batch = rest
			ripe = len(batch) > 0
			if !ripe {
				expiry = nil
				timer.Stop()
			}
		}
	}
}

// share splits batch (of the given size) into what one idle flusher takes
// and the rest, both in turn order: its even share, and at least one
// request. With Config.Key, the last idle flusher takes only the requests
// of keys that hold no flusher (waiting names the keys in batch), and none
// when every waiting key holds one. What it takes belongs to the flusher
// once sent: the collector no longer reads it.
func (c *Committer[T, R]) share(batch []*pending[T, R], size int, waiting *turns) (take []*pending[T, R], takeSize int, rest []*pending[T, R]) {
	idle := max(1, c.config.Flushers-int(c.busy.Load()))
	if l := c.config.Limiter; l != nil {
		// The permit in hand, and those free for the next batches.
		idle = min(idle, 1+l.Available())
	}
	if c.config.Key != nil && idle == 1 {
		c.flushingMu.Lock()
		defer c.flushingMu.Unlock()
		// Most of the time, in a storm, no waiting key may: a look at the
		// keys, not at every request.
		if !waiting.any(func(key string) bool { return c.flushing[key] == 0 }) {
			return nil, 0, batch
		}
		rest = make([]*pending[T, R], 0, len(batch))
		for _, p := range batch {
			if c.flushing[p.key] == 0 && takeSize < c.config.MaxSize {
				take = append(take, p)
				takeSize += p.size
			} else {
				rest = append(rest, p)
			}
		}
		return take, takeSize, rest
	}
	target := (min(size, c.config.MaxSize) + idle - 1) / idle
	n := 0
	for n < len(batch) && (n == 0 || takeSize < target) {
		takeSize += batch[n].size
		n++
	}
	return batch[:n:n], takeSize, batch[n:]
}

// countFlushing adds delta to the batches in the flushers' hands of each
// key of batch, once per key.
func (c *Committer[T, R]) countFlushing(batch []*pending[T, R], delta int) {
	if c.config.Key == nil {
		return
	}
	var keys []string
	for _, p := range batch {
		if !slices.Contains(keys, p.key) {
			keys = append(keys, p.key)
		}
	}
	c.flushingMu.Lock()
	defer c.flushingMu.Unlock()
	for _, key := range keys {
		if c.flushing[key] += delta; c.flushing[key] == 0 {
			delete(c.flushing, key)
		}
	}
}

// turns orders the collector's waiting requests fairly among keys. Each
// request gets a turn: a key's first waiting request takes the turn of the
// batch's head, and each next one the turn after its key's last. The batch
// is kept in turn order (arrival order within a turn), so the head holds
// one request of each waiting key before a second of any: a key that
// queued a thousand requests takes a thousand turns, and a key that
// arrives behind them is served in the first. With no Key all requests
// share one key and the order is arrival order.
type turns struct {
	// last is each waiting key's last turn, held the count of its requests
	// in the batch.
	last map[string]uint64
	held map[string]int
}

// next returns the turn of a request of key when the batch's head has turn
// head.
func (o *turns) next(key string, head uint64) uint64 {
	if o.held == nil {
		o.last, o.held = map[string]uint64{}, map[string]int{}
	}
	turn := head
	if o.held[key] > 0 {
		turn = max(head, o.last[key]+1)
	}
	o.last[key] = turn
	o.held[key]++
	return turn
}

// any reports whether f holds for a key with requests in the batch.
func (o *turns) any(f func(key string) bool) bool {
	for key := range o.held {
		if f(key) {
			return true
		}
	}
	return false
}

// sent counts a request of key out of the batch.
func (o *turns) sent(key string) {
	if o.held[key]--; o.held[key] <= 0 {
		delete(o.held, key)
		delete(o.last, key)
	}
}

func (c *Committer[T, R]) flushLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case batch := <-c.batches:
			for _, p := range batch {
				c.dequeued(p)
			}
			c.flushBatch(batch)
			c.countFlushing(batch, -1)
			c.busy.Add(-1)
			if c.config.Limiter != nil {
				c.config.Limiter.Release()
			}
			select {
			case c.freed <- struct{}{}:
			default:
			}
		}
	}
}

// dequeued counts p out of the waiting requests: a flusher took it, or
// Stop answered it.
func (c *Committer[T, R]) dequeued(p *pending[T, R]) {
	c.waiting.Add(-1)
	if c.shares != nil {
		c.shares.Release(p.key)
	}
}

// flushBatch flushes the requests of batch whose context has not ended
// and answers every request.
func (c *Committer[T, R]) flushBatch(batch []*pending[T, R]) {
	live := make([]*pending[T, R], 0, len(batch))
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- Result[R]{Err: err}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	requests := make([]Request[T], len(live))
	for i, p := range live {
		requests[i] = Request[T]{Ctx: p.ctx, Item: p.item}
	}
	ctx, cancel := c.batchContext(live)
	results, err := c.flush(ctx, requests)
	cancel()
	if err == nil && len(results) != len(live) {
		err = fmt.Errorf("groupcommit: flush returned %d results for %d requests", len(results), len(live))
	}
	for i, p := range live {
		if err != nil {
			p.done <- Result[R]{Err: err}
		} else {
			p.done <- results[i]
		}
	}
}

// batchContext returns the context of a batch of live: it has the earliest
// of their deadlines and, with WaitForAnswer, is cancelled when any of
// their contexts is.
func (c *Committer[T, R]) batchContext(live []*pending[T, R]) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var deadline time.Time
	var stops []func() bool
	for _, p := range live {
		if c.config.WaitForAnswer {
			stops = append(stops, context.AfterFunc(p.ctx, cancel))
		}
		if d, ok := p.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	cancelDeadline := context.CancelFunc(func() {})
	if !deadline.IsZero() {
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancelDeadline()
		cancel()
	}
}
