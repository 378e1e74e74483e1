package component

import (
	"cmp"
	"errors"
)

// The defaults Pace.WithDefaults applies to a zero Pace field.
const (
	// ReplayRateDefault is Pace.Rate's default, rows per second: a replay
	// of a million rows takes about 35 minutes, and its jobs wait behind
	// live events anyway (a lower River priority).
	ReplayRateDefault = 500
	// ReplayBatchDefault is Pace.Batch's default, rows per transaction.
	ReplayBatchDefault = 100
)

// Pace holds a bulk replay's default pace (internal/replay aliases it). Its tagged fields are keys of the
// worker: section of the YAML configuration (pkg/config decodes them
// directly). WithDefaults applies the defaults stated below, Validate
// checks them.
type Pace struct {
	// Rate is a bulk replay's default pace, rows per second
	// (`inboxctl replay --rate` overrides it per run). Replayed events'
	// jobs also wait behind live ones (a lower River priority). Defaults
	// to 500.
	Rate int `mapstructure:"replay_rate"`
	// Batch is how many rows one bulk replay transaction puts back
	// to pending. Defaults to 100.
	Batch int `mapstructure:"replay_batch"`
}

// WithDefaults returns a copy of p with every zero-valued setting at its
// documented default. It is idempotent.
func (p *Pace) WithDefaults() *Pace {
	out := *p
	out.Rate = cmp.Or(out.Rate, ReplayRateDefault)
	out.Batch = cmp.Or(out.Batch, ReplayBatchDefault)
	return &out
}

// Validate checks a Pace that WithDefaults filled, and returns every
// problem found, each an error that starts with its key in the worker:
// section ("replay_rate: must be positive"), joined.
func (p *Pace) Validate() error {
	var errs []error
	if p.Rate <= 0 {
		errs = append(errs, errors.New("replay_rate: must be positive"))
	}
	if p.Batch <= 0 {
		errs = append(errs, errors.New("replay_batch: must be positive"))
	}
	return errors.Join(errs...)
}
