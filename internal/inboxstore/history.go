package inboxstore

import (
	"fmt"
	"time"
)

// AttemptHistoryMax caps the entries of a row's attempt history: the oldest
// is dropped to make room, so that a row replayed for years stays small.
const AttemptHistoryMax = 50

// AttemptError is one failed run of an event's handlers, as the row's
// attempt history (webhook_inbox.attempt_errors) keeps it.
type AttemptError struct {
	// At is when the failure was recorded.
	At time.Time `json:"at"`
	// Attempt is the row's attempt count after the run (0 for an event
	// failed on arrival, before any run).
	Attempt int `json:"attempt"`
	// JobID is the River job that ran, when known.
	JobID *int64 `json:"job_id,omitempty"`
	// Error is the handlers' error.
	Error string `json:"error"`
}

// appendAttemptError is the SQL expression of attempt_errors with one entry
// appended, the oldest dropped past AttemptHistoryMax. Its arguments are SQL
// expressions: the time (NULL for now()), the attempt number, the job id
// (may be NULL) and the error.
func appendAttemptError(at, attempt, jobID, reason string) string {
	return fmt.Sprintf(`(CASE WHEN jsonb_array_length(attempt_errors) >= %d THEN attempt_errors - 0 ELSE attempt_errors END)
        || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('at', coalesce(%s, now()), 'attempt', %s, 'job_id', %s, 'error', %s::text)))`,
		AttemptHistoryMax, at, attempt, jobID, reason)
}
