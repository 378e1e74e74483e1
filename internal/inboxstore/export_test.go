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
SELECT id, source, provider, event_id, event_type, payload, body, headers, status, attempts, coalesce(last_error, ''), received_at, coalesce(request_id, '')
FROM webhook_inbox WHERE id = $1`, id))
}
