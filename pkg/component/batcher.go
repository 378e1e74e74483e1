package component

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/fairshare"
)

// The defaults BatcherConfig.WithDefaults applies to a zero field.
const (
	// BatchMaxEventsDefault is BatcherConfig.MaxEvents's default.
	BatchMaxEventsDefault = 256
	// BatchFlushersDefault is BatcherConfig.Flushers's default.
	BatchFlushersDefault = 4
	// BatchQueueSizeDefault is BatcherConfig.QueueSize's default.
	BatchQueueSizeDefault = 1024
)

// BatcherConfig configures the receiver's group commit, internal/inboxstore's
// Batcher (which aliases it). Its tagged fields are keys of the
// receiver: section of the YAML configuration (pkg/config squashes them in);
// the others are set in code. WithDefaults applies the defaults stated
// below, Validate checks the tagged fields.
type BatcherConfig struct {
	// MaxEvents caps the events one group-commit transaction claims; a
	// delivery is never split, so the one that reaches the cap joins whole.
	// 1 turns group commit off (a transaction per delivery). Defaults to 256.
	MaxEvents int `mapstructure:"batch_max_events"`
	// MaxWait is how long a group waits for company once the queue is
	// empty. Defaults to 0: a lone delivery never waits; groups form on
	// their own while earlier ones commit.
	MaxWait time.Duration `mapstructure:"batch_max_wait"`
	// Flushers is the number of group transactions in flight at once;
	// each holds a connection. One source takes at most all but one of
	// them while it holds any: the last is kept for the other sources.
	// Defaults to 4.
	Flushers int `mapstructure:"batch_flushers"`
	// QueueSize bounds the deliveries waiting for a transaction; past it a
	// delivery gets 503 with Retry-After at once (Ingest returns
	// ErrOverloaded). Defaults to 1024.
	QueueSize int `mapstructure:"batch_queue"`
	// SourceShare is the share of the queue slots the other sources leave
	// that one source may hold: past it a delivery of that source gets 503
	// with Retry-After (Ingest returns ErrSourceShare), so that one
	// source's storm cannot fill the queue another source needs (see
	// internal/fairshare). Set in code from the receiver's source_share
	// (more than 0, at most 1). Defaults to fairshare.ShareDefault (0.5).
	SourceShare float64 `mapstructure:"-"`
	// Logger defaults to a no-op logger.
	Logger *zap.Logger `mapstructure:"-"`
	// ObserveGroup, when set, is called with the events of each group
	// before its transaction runs (a metric's hook). It must not block.
	ObserveGroup func(events int) `mapstructure:"-"`
	// TracerProvider, when set, traces each group transaction: a span
	// "hookinbox.commit", the child of a lone delivery's span, or, for
	// several, linked to each of their spans. nil traces nothing.
	TracerProvider trace.TracerProvider `mapstructure:"-"`
}

// WithDefaults returns a copy of c with every zero-valued setting at its
// documented default. It is idempotent.
func (c *BatcherConfig) WithDefaults() *BatcherConfig {
	out := *c
	out.MaxEvents = cmp.Or(out.MaxEvents, BatchMaxEventsDefault)
	out.Flushers = cmp.Or(out.Flushers, BatchFlushersDefault)
	out.QueueSize = cmp.Or(out.QueueSize, BatchQueueSizeDefault)
	out.SourceShare = cmp.Or(out.SourceShare, fairshare.ShareDefault)
	return &out
}

// Validate checks the settings (the tagged fields) of a BatcherConfig that
// WithDefaults filled, and returns every problem found, each an error that
// starts with its key in the receiver: section ("batch_flushers: must be
// positive"), joined.
func (c *BatcherConfig) Validate() error {
	var errs []error
	positive := func(key string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", key))
		}
	}
	positive("batch_max_events", c.MaxEvents)
	positive("batch_flushers", c.Flushers)
	positive("batch_queue", c.QueueSize)
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("batch_max_wait: must not be negative"))
	}
	return errors.Join(errs...)
}
