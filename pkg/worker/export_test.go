package worker

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// QueuedForGroup returns how many jobs wait for a group transaction.
func (w *Worker) QueuedForGroup() int { return w.group.Waiting() }

// TransactionLimit returns how many group transactions may run at once
// now, and how many permits are out.
func (w *Worker) TransactionLimit() (limit, inUse int) { return w.limit.Limit(), w.limit.InUse() }

// What the external tests reach that is not exported.
var CheckRoutes = checkRoutes

// AdvisoryKey returns the lock key a route's LockOption takes for an event
// of source whose located key is key.
func AdvisoryKey(source, key string) int64 { return advisoryKey(source, key) }

// SeesPaused reports whether the worker's view has source paused.
func (w *Worker) SeesPaused(source string) bool { return w.pauses.isPaused(source) }

// Fenced reports whether the worker has fenced itself.
func (w *Worker) Fenced() bool { return w.registration.fenced() }

// RoutesDescription returns what the worker records as its routes on
// queue.
func (w *Worker) RoutesDescription(queue string) string {
	for i, q := range w.registration.queues {
		if q == queue {
			return w.registration.routes[i]
		}
	}
	return ""
}

// RaiseTransactionLimit feeds the group transactions' limiter rounds of
// steady commits with jobs waiting until its limit is n (at most the
// flushers), as a busy worker's commits would: a test's precondition,
// without a load that a busy machine's latency can cut short. The commits
// it feeds take a second, so that the test's own, faster, never look
// congested beside them.
func (w *Worker) RaiseTransactionLimit(n int) {
	for i := 0; w.limit.Limit() < n && i < 10_000; i++ {
		w.limit.Observe(time.Second, true)
	}
}

// SetRegistrationPool has the worker's routes records (claims, renewals,
// the look for a newer route set, the delete) go through pool: a test cuts
// them off, or loses their answers, alone. Before Start.
func (w *Worker) SetRegistrationPool(p *pgxpool.Pool) { w.registration.pool = p }
