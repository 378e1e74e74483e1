package metrics

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// readTimeout bounds one reading of the database for a scrape.
const readTimeout = 5 * time.Second

// cachedReading is what a collector reads from the database when scraped,
// at most once per cache period: Backlog's and OutboxBacklog's readings.
type cachedReading[T any] struct {
	mu     sync.Mutex
	readAt time.Time
	value  T
	ok     bool
}

// get returns the reading, first taking a new one with read when the last
// one is older than cache (or there is none). A failed reading is logged as
// what could not be read, and get then reports false until one succeeds.
func (c *cachedReading[T]) get(now time.Time, cache time.Duration, logger *zap.Logger, what string,
	read func(ctx context.Context) (T, error),
) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() || now.Sub(c.readAt) >= cache {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		value, err := read(ctx)
		cancel()
		if err != nil {
			logger.Warn("could not read "+what+" for /metrics", zap.Error(err))
		}
		c.value, c.ok, c.readAt = value, err == nil, now
	}
	return c.value, c.ok
}
