package worker

import (
	"context"
	"errors"
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
	w := &eventWorker{logger: zaptest.NewLogger(t)}
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
