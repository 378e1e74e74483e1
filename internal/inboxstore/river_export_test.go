package inboxstore

import "context"

// NewestJob exposes newestJob, the adapter's lateral look-up of row i's
// job, to the River schema contract test.
const NewestJob = newestJob

// WaitingJobs exposes waitingJobs to the River schema contract test.
func WaitingJobs(queues string) string { return waitingJobs(queues) }

// DeadQueues exposes deadQueues to the River schema contract test.
func (s *Store) DeadQueues(ctx context.Context, db DBTX, live []string) ([]string, error) {
	return s.deadQueues(ctx, db, live)
}
