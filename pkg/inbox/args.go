package inbox

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
}

// Kind implements river.JobArgs.
func (JobArgs) Kind() string { return JobKind }
