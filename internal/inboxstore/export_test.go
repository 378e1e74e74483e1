package inboxstore

import "context"

// ExistingEventIDs exposes existingEventIDs to the package's tests.
func (s *Store) ExistingEventIDs(ctx context.Context, db DBTX, sources, eventIDs []string) (map[[2]string]bool, error) {
	return s.existingEventIDs(ctx, db, sources, eventIDs)
}

// Get returns the row without locking it: the package's tests read rows
// with it; nothing else needs to.
func (s *Store) Get(ctx context.Context, db DBTX, id int64) (*Event, error) {
	return scanEvent(db.QueryRow(ctx, `
SELECT m.id, m.source, m.provider, m.event_id, m.event_type, `+deliveryColumns+`, m.status, m.attempts, coalesce(m.last_error, ''),
       m.received_at, coalesce(m.request_id, '')
FROM webhook_inbox AS m LEFT JOIN webhook_inbox_delivery AS d ON d.inbox_id = m.id WHERE m.id = $1`, id))
}
