package worker

import (
	"context"

	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"
)

// How many attempts an event gets is decided in one place: the worker's
// Config.MaxAttempts (worker.max_attempts), since the worker is what runs
// and retries the event. Every enqueuer stamps a job's max_attempts (River
// requires one at insert): the receiver, a bulk replay started by inboxctl,
// Resume, the reaper, each from its own process's configuration, which may
// differ from the worker's. The worker does not trust the stamp: before an
// event's job runs, alignAttempts makes the job's budget the worker's, on
// the job row (so River UI shows attempt/max as the worker will apply it;
// inboxstore.Store.SetJobMaxAttempts, River's schema adapter) and on the
// in-memory row River's executor decides on when the run fails
// (River hands Work the very *rivertype.JobRow it reads after Work returns:
// retry below MaxAttempts, discard at it). A stamp that agrees costs
// nothing.

// alignAttempts sets job's MaxAttempts to the worker's, on the job row and in
// memory, when they differ. A failed write is logged and the run goes on
// with the in-memory budget, which decides this run; the next run tries the
// write again.
func (w *eventWorker) alignAttempts(ctx context.Context, job *rivertype.JobRow) {
	if w.maxAttempts <= 0 || job.MaxAttempts == w.maxAttempts {
		return
	}
	stamped := job.MaxAttempts
	job.MaxAttempts = w.maxAttempts
	if err := w.store.SetJobMaxAttempts(ctx, w.pool, job.ID, w.maxAttempts); err != nil {
		w.logger.Warn("could not set the job's max_attempts to worker.max_attempts", zap.Int64("job_id", job.ID),
			zap.Int("stamped", stamped), zap.Int("max_attempts", w.maxAttempts), zap.Error(err))
	}
}
