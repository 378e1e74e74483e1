package inboxstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StoredDelivery is what the inbox keeps of the delivery that brought a
// row: the raw bytes its signature covered and the headers needed to check
// it again, for re-verification and audit.
type StoredDelivery struct {
	ID       int64
	Source   string
	Provider string
	EventID  string
	// Body is the raw request body; nil once erased.
	Body []byte
	// Headers are the audit headers the provider's verifier kept (never
	// Authorization); nil once erased.
	Headers map[string]string
	// ReceivedAt is when the receiver claimed the row, moments after it
	// verified the delivery.
	ReceivedAt time.Time
	// ErasedAt is when Body and Headers were erased (payload_retention or a
	// purge); nil while the row has them.
	ErasedAt *time.Time
}

// StoredDelivery returns the stored delivery of the row id, or ErrNotFound.
// It is the one reader of a row's stored body and headers outside the
// worker's claim of it.
func (s *Store) StoredDelivery(ctx context.Context, id int64) (*StoredDelivery, error) {
	var d StoredDelivery
	err := s.pool.QueryRow(ctx, `
SELECT m.id, m.source, m.provider, m.event_id, coalesce(d.body, m.legacy_body), coalesce(d.headers, m.legacy_headers), m.received_at, m.erased_at
FROM webhook_inbox AS m LEFT JOIN webhook_inbox_delivery AS d ON d.inbox_id = m.id WHERE m.id = $1`, planned, id).Scan(
		&d.ID, &d.Source, &d.Provider, &d.EventID, &d.Body, &d.Headers, &d.ReceivedAt, &d.ErasedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("inbox: read stored delivery: %w", err)
	}
	return &d, nil
}
