package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// ReaperArgs are the arguments of the periodic reaper job.
type ReaperArgs struct{}

// Kind implements river.JobArgs.
func (ReaperArgs) Kind() string { return "hookinbox.reaper" }

// reaperBatch caps the rows one reaper run touches.
const reaperBatch = 1000

// reaper heals pending rows left without a live job: a row whose job
// vanished (deleted by hand, or never enqueued by an older build) gets a new
// job; a row whose job was discarded or cancelled without the failure being
// recorded (its worker died at the last attempt, say) is marked failed with
// the job's last error, so the reaper never loops on it. Stuck running jobs
// are River's rescuer's to heal.
type reaper struct {
	river.WorkerDefaults[ReaperArgs]

	pool        *pgxpool.Pool
	store       *inbox.Store
	orphanAfter time.Duration
	queueFor    func(string) string
	logger      *zap.Logger
}

// Work runs one reaper pass.
func (r *reaper) Work(ctx context.Context, _ *river.Job[ReaperArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	_, err = reapOnce(ctx, r.pool, r.store, client, r.orphanAfter, r.queueFor, r.logger)
	return err
}

// ReapResult counts what one reaper pass did.
type ReapResult struct {
	Requeued, Failed int
}

func reapOnce(ctx context.Context, pool *pgxpool.Pool, store *inbox.Store, client *river.Client[pgx.Tx],
	orphanAfter time.Duration, queueFor func(string) string, logger *zap.Logger,
) (*ReapResult, error) {
	res := &ReapResult{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		orphans, err := store.ListOrphans(ctx, tx, time.Now().Add(-orphanAfter), reaperBatch)
		if err != nil {
			return err
		}
		var requeue []inbox.ClaimedRow
		for _, o := range orphans {
			switch o.JobState {
			case "discarded", "cancelled":
				reason := fmt.Sprintf("job %s: %s", o.JobState, o.JobError)
				if err := store.RecordFailure(ctx, tx, o.ID, 0, reason, true, time.Time{}); err != nil {
					return err
				}
				res.Failed++
			default:
				requeue = append(requeue, inbox.ClaimedRow{
					ID: o.ID, Source: o.Source, EventID: o.EventID, Status: inbox.StatusPending, EventType: o.EventType, RequestID: o.RequestID,
				})
			}
		}
		res.Requeued = len(requeue)
		return store.EnqueueTx(ctx, tx, client, requeue, queueFor)
	})
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	if res.Requeued+res.Failed > 0 {
		logger.Info("reaper healed orphaned rows", zap.Int("requeued", res.Requeued), zap.Int("failed", res.Failed))
	}
	return res, nil
}
