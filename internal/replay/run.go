package replay

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// JobKind is the River job kind of a bulk replay.
const JobKind = "hookinbox.replay"

// Args are a bulk replay job's arguments: the run it works. Everything
// else (the selection, the cursor, the rate) is on the run's row, so that
// a cancelled run resumes where it stopped with a new job.
type Args struct {
	// RunID is hookinbox_replay.id.
	RunID int64 `json:"run_id"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return JobKind }

// State is a run's state.
type State string

// The states of a run.
const (
	// StateRunning runs have a job working them (or waiting to).
	StateRunning State = "running"
	// StateCancelled runs stopped on request; Resume continues them.
	StateCancelled State = "cancelled"
	// StateDone runs replayed every row their selection chose.
	StateDone State = "done"
)

// Run is a bulk replay as its row records it.
type Run struct {
	ID        int64                `json:"id"`
	Selection inboxstore.Selection `json:"selection"`
	State     State                `json:"state"`
	// CursorID is the largest inbox row id replayed so far.
	CursorID int64 `json:"cursor_id"`
	// Total counts the rows the selection matched when the run started;
	// Replayed the rows put back to pending so far.
	Total    int64 `json:"total"`
	Replayed int64 `json:"replayed"`
	// Rate is rows per second; Batch rows per transaction.
	Rate  int `json:"rate"`
	Batch int `json:"batch"`
	// JobID is the River job working the run, nil before the first.
	JobID      *int64     `json:"job_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Sentinel errors of the Manager.
var (
	// ErrNotFound is returned for a run id that does not exist.
	ErrNotFound = errors.New("replay: no such run")
	// ErrNotRunning is returned by Cancel for a run that is not running.
	ErrNotRunning = errors.New("replay: the run is not running")
	// ErrFinished is returned by Resume for a run that is done.
	ErrFinished = errors.New("replay: the run is done; start a new one")
	// ErrStillRunning is returned by Resume for a run whose job is alive.
	ErrStillRunning = errors.New("replay: the run is running; cancel it first")
	// ErrNothingToReplay is returned by Start for a selection that matches
	// no replayable row: no run is recorded and no job enqueued.
	ErrNothingToReplay = errors.New("replay: no done or failed event with its payload matches; nothing started")
)

const runColumns = `id, selection, state, cursor_id, total, replayed, rate, batch, river_job_id, created_at, updated_at, finished_at`

type scanner interface{ Scan(dest ...any) error }

func scanRun(row scanner) (*Run, error) {
	var r Run
	var sel []byte
	var state string
	if err := row.Scan(&r.ID, &sel, &state, &r.CursorID, &r.Total, &r.Replayed, &r.Rate, &r.Batch, &r.JobID,
		&r.CreatedAt, &r.UpdatedAt, &r.FinishedAt); err != nil {
		return nil, err
	}
	r.State = State(state)
	if err := json.Unmarshal(sel, &r.Selection); err != nil {
		return nil, err
	}
	return &r, nil
}
