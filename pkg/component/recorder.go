package component

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// The defaults RecorderConfig.WithDefaults applies to a zero field, and
// Keep's bound.
const (
	// RecorderKeepDefault is RecorderConfig.Keep's default.
	RecorderKeepDefault = 20
	// RecorderSampleBurstDefault is RecorderConfig.SampleBurst's default.
	RecorderSampleBurstDefault = 5
	// RecorderSampleEveryDefault is RecorderConfig.SampleEvery's default.
	RecorderSampleEveryDefault = 10 * time.Second
	// RecorderKeepMax is the most samples RecorderConfig.Keep may ask for.
	RecorderKeepMax = 1000
)

// RecorderConfig configures the rejection samples' Recorder
// (internal/rejection aliases it). Its tagged fields are the keys of
// the receiver.rejections: section of the YAML configuration (pkg/config
// decodes them directly); the others are set in code. WithDefaults applies
// the defaults stated below, Validate checks the tagged fields.
type RecorderConfig struct {
	// Sources are the configured sources' names: only their refusals are
	// recorded (an unknown name comes from the client). Required.
	Sources []string `mapstructure:"-"`
	// Secrets are every configured secret, password and API key, redacted
	// from any header value that contains one (see Redactor).
	Secrets []string `mapstructure:"-"`
	// Keep is how many samples each source keeps, 1 to 1000. Defaults to 20.
	Keep int `mapstructure:"keep"`
	// SampleBurst is how many refusals of one source are recorded at once
	// before SampleEvery applies. Defaults to 5.
	SampleBurst int `mapstructure:"sample_burst"`
	// SampleEvery is the least time between two samples of one source once
	// the burst is spent, so a flood of refusals writes at most one row per
	// source per SampleEvery. Defaults to 10s.
	SampleEvery time.Duration `mapstructure:"sample_every"`
	// Logger defaults to a no-op logger.
	Logger *zap.Logger `mapstructure:"-"`
	// Now defaults to time.Now.
	Now func() time.Time `mapstructure:"-"`
}

// WithDefaults returns a copy of c with every zero-valued setting at its
// documented default. It is idempotent.
func (c *RecorderConfig) WithDefaults() *RecorderConfig {
	out := *c
	out.Keep = cmp.Or(out.Keep, RecorderKeepDefault)
	out.SampleBurst = cmp.Or(out.SampleBurst, RecorderSampleBurstDefault)
	out.SampleEvery = cmp.Or(out.SampleEvery, RecorderSampleEveryDefault)
	return &out
}

// Validate checks the settings (the tagged fields) of a RecorderConfig
// that WithDefaults filled, and returns every problem found, each an error
// that starts with its key in the receiver.rejections: section ("keep: must
// be …"), joined.
func (c *RecorderConfig) Validate() error {
	var errs []error
	if c.Keep < 1 || c.Keep > RecorderKeepMax {
		errs = append(errs, fmt.Errorf("keep: must be 1 to %d, not %d", RecorderKeepMax, c.Keep))
	}
	if c.SampleBurst <= 0 {
		errs = append(errs, errors.New("sample_burst: must be positive"))
	}
	if c.SampleEvery <= 0 {
		errs = append(errs, errors.New("sample_every: must be positive"))
	}
	return errors.Join(errs...)
}
