package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/hookinbox/hookinbox/internal/retention"
)

// RetentionPolicy is how long a source's events are kept once done: the
// worker's retention job (Config.Retention) deletes done rows past
// Retention and erases payloads past PayloadRetention, in small batches.
// Failed rows are never touched.
type RetentionPolicy struct {
	// Source is the source's name.
	Source string
	// Provider is the source's provider, whose redelivery window
	// (provider.RedeliveryWindow) Retention must outlive. Empty, or a
	// provider whose window is unknown (hmac), enforces none.
	Provider string
	// Retention is how long a done row is kept, from its receipt. It must
	// outlive the provider's redelivery window, or a redelivery after the
	// prune would be processed twice. 0 keeps rows for ever.
	Retention time.Duration
	// PayloadRetention, when set, is how long a done row keeps its body,
	// headers and payload; the row and its keys stay until Retention.
	PayloadRetention time.Duration
}

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
