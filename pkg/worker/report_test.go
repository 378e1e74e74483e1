package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// TestAStopCountsWhatTheRowCounted: reportResult's answer to River for a
// run cut by the worker's stop. River does not count an attempt for an
// error that says the job was cancelled: that is right for a run whose
// failure nothing recorded (here a connection the cancel closed, whose
// error does not say so by itself), and wrong for one whose failure its
// group's committed transaction recorded on the row (found by the review
// of d051961: River counted nothing, so a permanent failure, its row
// failed for good, ran again on the next worker).
func TestAStopCountsWhatTheRowCounted(t *testing.T) {
	t.Parallel()
	w := &eventWorker{logger: zaptest.NewLogger(t), stopping: new(atomic.Bool)}
	w.stopping.Store(true)
	run := &eventRun{job: &river.Job[inboxstore.JobArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 3}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closed := errors.New("conn closed")

	err := w.reportResult(ctx, run, jobOutcome{err: closed, began: true})
	require.ErrorIs(t, err, context.Canceled, "a run nothing recorded, cut by the stop: River must not count it")

	err = w.reportResult(ctx, run, jobOutcome{err: closed, began: true, recorded: true})
	require.ErrorIs(t, err, closed)
	require.NotErrorIs(t, err, context.Canceled, "a failure the group recorded, its run then cut by the stop: River must count it")
}

// TestARunRiversFailedStartCutIsNotCharged: River's start, failing after
// one queue's producer began (another queue's settings not written within
// River's 10 s), cancels the running jobs with the start's error as the
// cause, and counts each an attempt: it spares only its own stop's. The
// worker starts again (pkg/daemon), so a slow database cut the event's
// runs every 10 s and River discarded it after max_attempts, its row then
// failed by the reaper though no run of it ever failed (found by a
// helper's attack on 238d73a, which retries such a start). Such a run is
// put back: a snooze, which River does not count.
func TestARunRiversFailedStartCutIsNotCharged(t *testing.T) {
	t.Parallel()
	w := &eventWorker{logger: zaptest.NewLogger(t), stopping: new(atomic.Bool)}
	run := &eventRun{job: &river.Job[inboxstore.JobArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 3}}}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("producer.StartWorkContext timed out after 10s: %w", context.DeadlineExceeded))

	err := w.reportResult(ctx, run, jobOutcome{err: context.Canceled, began: true})
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, err, &snooze, "a run River's failed start cut: River must count no attempt")
	require.Equal(t, uncountedWait(0), snooze.Duration)

	w.stopping.Store(true)
	err = w.reportResult(ctx, run, jobOutcome{err: context.Canceled, began: true})
	require.ErrorIs(t, err, context.Canceled, "the same cut once the worker stops River: River's stop, which it does not count")
	require.NotErrorAs(t, err, &snooze)
}
