package outbox

import "time"

// Status is an outbox message's state.
type Status string

// The statuses of an outbox message.
const (
	// StatusPending messages wait for the relay (or for their retry).
	StatusPending Status = "pending"
	// StatusDelivered messages were acknowledged by their destination.
	StatusDelivered Status = "delivered"
	// StatusFailed messages ran out of attempts, or were refused for good.
	StatusFailed Status = "failed"
)

// Record is an outbox row, as the relay delivers it and inboxctl lists it.
type Record struct {
	ID          int64
	Key         string
	Destination string
	Source      string
	EventID     string
	EventType   string
	Payload     []byte
	Headers     map[string]string
	Status      Status
	// Attempts counts the deliveries started, this one included when the
	// relay hands the record to a destination.
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
	DeliveredAt   *time.Time
}
