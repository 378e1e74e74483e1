package inboxstore

import "context"

// NewestJob exposes newestJob, the adapter's lateral look-up of row i's
// job, to the River schema contract test.
const NewestJob = newestJob

// WaitingInboxIDs exposes waitingInboxIDs to the River schema contract
// test.
func WaitingInboxIDs(queues string) string { return waitingInboxIDs(queues) }

// DeadQueues exposes deadQueues to the River schema contract test.
func (s *Store) DeadQueues(ctx context.Context, db DBTX, live []string) ([]string, error) {
	return s.deadQueues(ctx, db, live)
}
