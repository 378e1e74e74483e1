package relay

import (
	"errors"
	"time"

	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// outcome classifies a delivery error for the relay.
type outcome int

const (
	outcomeRetry outcome = iota
	outcomeRetryAfter
	outcomeDisable
	outcomePermanent
)

func classify(err error) (outcome, time.Duration) {
	var ra *outbox.RetryAfterError
	var de *outbox.DisableError
	var pe *outbox.PermanentError
	switch {
	case errors.As(err, &de):
		return outcomeDisable, 0
	case errors.As(err, &pe):
		return outcomePermanent, 0
	case errors.As(err, &ra):
		return outcomeRetryAfter, ra.After
	}
	return outcomeRetry, 0
}
