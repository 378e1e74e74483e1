package worker

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// pauseRefreshDefault is Config.PauseRefresh's default.
const pauseRefreshDefault = time.Second

// pauseWatch keeps this worker's view of the paused sources, read from
// hookinbox_source_pause every interval. The view only decides whether an
// event takes the slow path (inboxstore.Store.Hold, which checks the table
// under a lock): a stale "paused" costs one statement and is corrected by
// Hold; a stale "not paused" lets an event through for at most one
// interval after a pause, which is the documented delay of a pause.
type pauseWatch struct {
	store    *inboxstore.Store
	interval time.Duration
	logger   *zap.Logger
	paused   atomic.Pointer[map[string]bool]

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

func newPauseWatch(store *inboxstore.Store, interval time.Duration, logger *zap.Logger) *pauseWatch {
	p := &pauseWatch{store: store, interval: interval, logger: logger}
	p.paused.Store(&map[string]bool{})
	return p
}

// isPaused reports whether source was paused at the last refresh.
func (p *pauseWatch) isPaused(source string) bool { return (*p.paused.Load())[source] }

// refresh reads the paused sources and logs each change ("source paused",
// "source resumed", one line per source, which tests wait on) once the new
// view is in effect: an event whose pause check comes after a "source
// paused" line in the log sees the pause (the soak's pause promise counts
// on that order).
func (p *pauseWatch) refresh(ctx context.Context) error {
	rows, err := p.store.PausedSources(ctx)
	if err != nil {
		return err
	}
	next := make(map[string]bool, len(rows))
	for _, r := range rows {
		next[r.Source] = true
	}
	prev := *p.paused.Swap(&next)
	for _, s := range slices.Sorted(maps.Keys(next)) {
		if !prev[s] {
			p.logger.Info("source paused: its events are held", zap.String("source", s))
		}
	}
	for _, s := range slices.Sorted(maps.Keys(prev)) {
		if !next[s] {
			p.logger.Info("source resumed", zap.String("source", s))
		}
	}
	return nil
}

// start reads the paused sources once, so that no event is worked before
// the worker knows them, then refreshes them every interval until stopped.
func (p *pauseWatch) start(ctx context.Context) error {
	if err := p.refresh(ctx); err != nil {
		return err
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.loop(context.WithoutCancel(ctx))
	return nil
}

func (p *pauseWatch) loop(ctx context.Context) {
	defer close(p.done)
	ticker := time.NewTicker(p.interval)
	defer ticker.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-ticker.C:
		}
		refreshCtx, cancel := context.WithTimeout(ctx, max(p.interval, time.Second))
		if err := p.refresh(refreshCtx); err != nil {
			p.logger.Warn("could not read the paused sources; keeping the last view", zap.Error(err))
		}
		cancel()
	}
}

// shutdown stops the refreshes. Safe to call when start was not.
func (p *pauseWatch) shutdown() {
	if p.stop == nil {
		return
	}
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}
