package worker

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/hookinbox/hookinbox/internal/retention"
)

// pruneArgs are the arguments of the periodic retention job.
type pruneArgs struct{}

// Kind implements river.JobArgs.
func (pruneArgs) Kind() string { return "hookinbox.prune" }

// pruneWorker runs the retention policies (see internal/retention): done rows
// past their source's retention are deleted, payloads past payload
// retention erased, in small batches. Failed rows are never touched.
type pruneWorker struct {
	river.WorkerDefaults[pruneArgs]

	pruner *retention.Pruner
}

// Work runs one retention pass.
func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[pruneArgs]) error {
	_, err := w.pruner.Run(ctx)
	return err
}
