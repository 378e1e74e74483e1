package receiver

import (
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// How often refusals of one reason are logged: the first rejectionLogBurst
// lines of each reason in every rejectionLogInterval; the rest are counted
// and reported in one "rejections suppressed" line with the next refusal
// of that reason after the interval.
const (
	rejectionLogInterval = time.Second
	rejectionLogBurst    = 10
)

// sampleRejections returns logger with its refusal lines sampled per
// reason, so that a flood of unauthenticated requests cannot flood the
// log. Only "delivery" lines that carry a reason (refusals) are sampled;
// every delivery answered 2xx is logged. The reasons are a small fixed
// set, so the sampler's state stays small whatever clients send.
func sampleRejections(logger *zap.Logger, interval time.Duration, burst int) *zap.Logger {
	state := &sampleState{interval: interval, burst: burst, reasons: map[string]*sampleWindow{}}
	return logger.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return &sampledCore{Core: core, state: state}
	}))
}

type sampleState struct {
	mu       sync.Mutex
	interval time.Duration
	burst    int
	reasons  map[string]*sampleWindow
}

// sampleWindow counts one reason's lines in the current interval.
type sampleWindow struct {
	start      time.Time
	logged     int
	suppressed int
}

// admit reports whether a line of reason at now is logged, and how many
// lines of that reason the interval before it suppressed.
func (st *sampleState) admit(reason string, now time.Time) (log bool, suppressed int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	w := st.reasons[reason]
	if w == nil {
		w = &sampleWindow{start: now}
		st.reasons[reason] = w
	}
	if now.Sub(w.start) >= st.interval {
		suppressed = w.suppressed
		*w = sampleWindow{start: now}
	}
	if w.logged < st.burst {
		w.logged++
		return true, suppressed
	}
	w.suppressed++
	return false, suppressed
}

// sampledCore drops the refusal lines its state does not admit.
type sampledCore struct {
	zapcore.Core
	state *sampleState
}

func (c *sampledCore) With(fields []zapcore.Field) zapcore.Core {
	return &sampledCore{Core: c.Core.With(fields), state: c.state}
}

func (c *sampledCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *sampledCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	reason := ""
	if ent.Message == "delivery" {
		for _, f := range fields {
			if f.Key == "reason" && f.Type == zapcore.StringType {
				reason = f.String
				break
			}
		}
	}
	if reason == "" {
		return c.Core.Write(ent, fields)
	}
	log, suppressed := c.state.admit(reason, ent.Time)
	if suppressed > 0 {
		summary := ent
		summary.Message = "rejections suppressed"
		summary.Level = max(ent.Level, zapcore.WarnLevel)
		if err := c.Core.Write(summary, []zapcore.Field{
			zap.String("reason", reason), zap.Int("suppressed", suppressed), zap.Duration("interval", c.state.interval),
		}); err != nil {
			return err
		}
	}
	if !log {
		return nil
	}
	return c.Core.Write(ent, fields)
}
