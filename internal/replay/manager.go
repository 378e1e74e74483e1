package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// The defaults NewManager applies to a zero Config field.
const (
	// RateDefault is Pace.Rate's default, rows per second: a replay of a
	// million rows takes about 35 minutes, and its jobs wait behind live
	// events anyway (inboxstore.ReplayPriority).
	RateDefault = component.ReplayRateDefault
	// BatchDefault is Pace.Batch's default, rows per transaction.
	BatchDefault = component.ReplayBatchDefault
	// MaxAttemptsDefault is how often a run's job is retried after an
	// error before River discards it (Resume then starts a new one).
	MaxAttemptsDefault = 10
)

// Pace holds a run's default pace, declared in pkg/component so that
// pkg/config names a public type; WithDefaults and Validate are there.
type Pace = component.Pace

// Config configures a Manager.
type Config struct {
	// Pace is a run's default pace (Rate, Batch).
	Pace
	// Queue is the River queue of the bulk replay jobs: one the worker
	// works. Defaults to River's default queue.
	Queue string
	// QueueFor names the queue of a source's event jobs, as the receiver
	// enqueues them. Defaults to River's default queue.
	QueueFor func(source string) string
}

// Manager starts, inspects, cancels and resumes bulk replays, and replays
// single events. It needs a River client only to insert jobs (an insert-only
// client does).
type Manager struct {
	pool   *pgxpool.Pool
	store  *inboxstore.Store
	client *river.Client[pgx.Tx]
	config Config
}

// NewManager returns a Manager on pool and client.
func NewManager(pool *pgxpool.Pool, client *river.Client[pgx.Tx], config *Config) (*Manager, error) {
	c := *config
	c.Pace = *c.WithDefaults()
	c.Queue = cmp.Or(c.Queue, river.QueueDefault)
	if c.QueueFor == nil {
		c.QueueFor = func(string) string { return river.QueueDefault }
	}
	if c.Rate < 0 || c.Batch < 0 {
		return nil, errors.New("replay: Rate and Batch must be positive")
	}
	return &Manager{pool: pool, store: inboxstore.New(pool), client: client, config: c}, nil
}

// StartParams says what a bulk replay replays, and how fast.
type StartParams struct {
	// Selection chooses the rows. Statuses may name done and failed; empty
	// means both. Pending rows are never replayed, nor erased ones.
	Selection inboxstore.Selection
	// Rate is rows per second; 0 for the Manager's default.
	Rate int
	// Batch is rows per transaction; 0 for the Manager's default.
	Batch int
}

func (p *StartParams) validate() error {
	if err := p.Selection.Validate(); err != nil {
		return err
	}
	if slices.Contains(p.Selection.Statuses, inbox.StatusPending) {
		return errors.New("replay: pending rows are still to be processed; only done and failed rows can be replayed")
	}
	if p.Rate < 0 || p.Batch < 0 {
		return errors.New("replay: rate and batch must be positive")
	}
	return nil
}

// DryRun counts the rows a bulk replay of sel would replay, touching none.
func (m *Manager) DryRun(ctx context.Context, sel *inboxstore.Selection) (int64, error) {
	if err := (&StartParams{Selection: *sel}).validate(); err != nil {
		return 0, err
	}
	return m.store.CountReplayable(ctx, sel)
}

// Start records a run and enqueues its first job, in one transaction, and
// returns the run. The work happens in the worker; follow it with Get. A
// selection that matches no replayable row starts nothing and returns
// ErrNothingToReplay. The transaction commits durably
// (inboxstore.DurableTxOptions), as do Cancel's, Resume's and ReplayEvent's: the
// operator is told it is done.
func (m *Manager) Start(ctx context.Context, params *StartParams) (*Run, error) {
	if err := params.validate(); err != nil {
		return nil, err
	}
	total, err := m.store.CountReplayable(ctx, &params.Selection)
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, ErrNothingToReplay
	}
	sel, err := json.Marshal(params.Selection)
	if err != nil {
		return nil, fmt.Errorf("replay: encode selection: %w", err)
	}
	var run *Run
	err = inboxstore.BeginDurableFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO hookinbox_replay (selection, total, rate, batch) VALUES ($1, $2, $3, $4) RETURNING id`,
			sel, total, cmp.Or(params.Rate, m.config.Rate), cmp.Or(params.Batch, m.config.Batch)).Scan(&id); err != nil {
			return fmt.Errorf("replay: record run: %w", err)
		}
		run, err = m.enqueue(ctx, tx, id)
		return err
	})
	return run, err
}

// enqueue inserts a job for run id and makes it the run's job, in tx.
func (m *Manager) enqueue(ctx context.Context, tx pgx.Tx, id int64) (*Run, error) {
	res, err := m.client.InsertTx(ctx, tx, Args{RunID: id}, &river.InsertOpts{Queue: m.config.Queue, MaxAttempts: MaxAttemptsDefault})
	if err != nil {
		return nil, fmt.Errorf("replay: enqueue: %w", err)
	}
	run, err := scanRun(tx.QueryRow(ctx, `
UPDATE hookinbox_replay SET river_job_id = $2, state = 'running', updated_at = now() WHERE id = $1
RETURNING `+runColumns, id, res.Job.ID))
	if err != nil {
		return nil, fmt.Errorf("replay: link job: %w", err)
	}
	return run, nil
}

// Get returns run id, or ErrNotFound.
func (m *Manager) Get(ctx context.Context, id int64) (*Run, error) {
	run, err := scanRun(m.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM hookinbox_replay WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("replay: get run: %w", err)
	}
	return run, nil
}

// List returns the newest limit runs (100 when limit is 0), newest first.
func (m *Manager) List(ctx context.Context, limit int) ([]Run, error) {
	rows, err := m.pool.Query(ctx, `SELECT `+runColumns+` FROM hookinbox_replay ORDER BY id DESC LIMIT $1`, cmp.Or(limit, 100))
	if err != nil {
		return nil, fmt.Errorf("replay: list runs: %w", err)
	}
	defer rows.Close()
	runs := []Run{}
	for rows.Next() {
		run, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("replay: list runs: %w", err)
		}
		runs = append(runs, *run)
	}
	return runs, rows.Err()
}

// Cancel stops a running run: its job stops before its next batch (a batch
// in flight is rolled back), and the rows replayed so far stay replayed.
// It returns the run, ErrNotFound, or ErrNotRunning. It commits durably
// (inboxstore.DurableTxOptions).
func (m *Manager) Cancel(ctx context.Context, id int64) (*Run, error) {
	var run *Run
	err := inboxstore.BeginDurableFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		run, err = scanRun(tx.QueryRow(ctx, `
UPDATE hookinbox_replay SET state = 'cancelled', updated_at = now() WHERE id = $1 AND state = 'running'
RETURNING `+runColumns, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := m.Get(ctx, id); err != nil {
			return nil, err
		}
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, fmt.Errorf("replay: cancel: %w", err)
	}
	return run, nil
}

// Resume continues a cancelled run after its cursor with a new job, or a
// running one whose job died (discarded after its attempts). It returns the
// run, ErrNotFound, ErrFinished, or ErrStillRunning.
func (m *Manager) Resume(ctx context.Context, id int64) (*Run, error) {
	var run *Run
	err := inboxstore.BeginDurableFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var state string
		var jobID *int64
		err := tx.QueryRow(ctx, `SELECT state, river_job_id FROM hookinbox_replay WHERE id = $1 FOR UPDATE`, id).Scan(&state, &jobID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return fmt.Errorf("replay: resume: %w", err)
		case State(state) == StateDone:
			return ErrFinished
		case State(state) == StateRunning:
			live, err := m.jobLive(ctx, tx, jobID)
			if err != nil {
				return err
			}
			if live {
				return ErrStillRunning
			}
		}
		run, err = m.enqueue(ctx, tx, id)
		return err
	})
	return run, err
}

// jobLive reports whether the run's job jobID (nil for none) is unfinished,
// read through River's API in tx: a job River has pruned is not.
func (m *Manager) jobLive(ctx context.Context, tx pgx.Tx, jobID *int64) (bool, error) {
	if jobID == nil {
		return false, nil
	}
	job, err := m.client.JobGetTx(ctx, tx, *jobID)
	switch {
	case errors.Is(err, rivertype.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("replay: resume: job: %w", err)
	}
	return !slices.Contains([]rivertype.JobState{rivertype.JobStateCompleted, rivertype.JobStateDiscarded, rivertype.JobStateCancelled}, job.State), nil
}

// ReplayEvent replays one event at once: its row goes back to pending with
// a new job. It returns inbox.ErrNotFound or inboxstore.ErrNotReplayable.
func (m *Manager) ReplayEvent(ctx context.Context, source, eventID string) (*inboxstore.ClaimedRow, error) {
	var row *inboxstore.ClaimedRow
	err := inboxstore.BeginDurableFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		row, err = m.store.ReplayEventTx(ctx, tx, m.client, source, eventID, m.config.QueueFor)
		return err
	})
	return row, err
}
