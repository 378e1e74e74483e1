package inboxstore

// JobKind is the River job kind of an inbox event's job.
const JobKind = "hookinbox.event"

// JobArgs are the River job arguments: one job per inbox row. The row holds
// everything else, so the job stays small and the payload is stored once.
type JobArgs struct {
	// InboxID is webhook_inbox.id.
	InboxID int64 `json:"inbox_id"`
	// Source is copied for River UI's benefit; the row is authoritative.
	Source string `json:"source"`
	// EventID is copied for River UI's benefit; the row is authoritative.
	EventID string `json:"event_id"`
	// EventType is copied for River UI's benefit; the row is authoritative.
	EventType string `json:"event_type"`
	// RequestID is the X-Request-Id of the delivery that brought the event
	// in, logged by the worker with every line about the event. Empty for
	// events claimed before it was recorded.
	RequestID string `json:"request_id,omitempty"`
}

// Kind implements river.JobArgs.
func (JobArgs) Kind() string { return JobKind }
