// Package admin is what an operator does to a running hookinbox, behind
// both `inboxctl` and the worker's admin HTTP API (api.go): list and show
// events, replay one, verify one's stored delivery again (verify.go), pause
// and resume a source, read its rejection samples, and the inbox's stats. Both front ends call the same methods, so
// they cannot drift apart.
package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/rejection"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// ErrUnknownSource is returned for a source the config does not name.
var ErrUnknownSource = errors.New("admin: no such source in the config")

// Source is a configured source.
type Source struct {
	Name, Provider string
}

// Config configures an Admin.
type Config struct {
	// Sources are the configured sources. Required.
	Sources []Source
	// Client inserts the jobs of replays and resumes; it may be
	// insert-only. Required.
	Client *river.Client[pgx.Tx]
	// QueueFor names a source's queue. Required.
	QueueFor func(source string) string
	// ProviderConfig returns a configured source's verifier config with
	// the secrets it lists now (its secrets_file read again), for Verify.
	// Optional: without it Verify fails every signed row. Its errors must
	// not quote a secret.
	ProviderConfig func(source string) (*provider.Config, error)
}

// Admin runs operator actions on one database.
type Admin struct {
	pool       *pgxpool.Pool
	inbox      *inboxstore.Store
	rejections *rejection.Store
	config     Config
}

// New returns an Admin on pool.
func New(pool *pgxpool.Pool, config *Config) (*Admin, error) {
	if config.Client == nil || config.QueueFor == nil {
		return nil, errors.New("admin: Client and QueueFor are required")
	}
	return &Admin{pool: pool, inbox: inboxstore.New(pool), rejections: rejection.NewStore(pool), config: *config}, nil
}

// checkSource returns ErrUnknownSource for a source the config does not name.
func (a *Admin) checkSource(name string) error {
	if !slices.ContainsFunc(a.config.Sources, func(s Source) bool { return s.Name == name }) {
		return fmt.Errorf("%w: %q", ErrUnknownSource, name)
	}
	return nil
}

// SourceStatus is a source as `sources list` shows it.
type SourceStatus struct {
	Name     string     `json:"name"`
	Provider string     `json:"provider"`
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
	PausedBy string     `json:"paused_by,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	// Pending counts the rows waiting for a worker, Held those of them a
	// paused source's workers set aside, Failed the failed rows.
	Pending int64 `json:"pending"`
	Held    int64 `json:"held"`
	Failed  int64 `json:"failed"`
}

// Sources returns every configured source's state, in config order. A
// paused source that is no longer configured is listed too, last.
func (a *Admin) Sources(ctx context.Context) ([]SourceStatus, error) {
	paused, err := a.inbox.PausedSources(ctx)
	if err != nil {
		return nil, err
	}
	backlog, err := a.inbox.Backlog(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SourceStatus, 0, len(a.config.Sources))
	for _, s := range a.config.Sources {
		out = append(out, SourceStatus{Name: s.Name, Provider: s.Provider})
	}
	for _, p := range paused {
		i := slices.IndexFunc(out, func(s SourceStatus) bool { return s.Name == p.Source })
		if i < 0 {
			out = append(out, SourceStatus{Name: p.Source, Provider: "(not configured)"})
			i = len(out) - 1
		}
		at := p.PausedAt
		out[i].Paused, out[i].PausedAt, out[i].PausedBy, out[i].Reason = true, &at, p.PausedBy, p.Reason
		if out[i].Held, err = a.inbox.CountHeld(ctx, p.Source); err != nil {
			return nil, err
		}
	}
	for _, b := range backlog {
		i := slices.IndexFunc(out, func(s SourceStatus) bool { return s.Name == b.Source })
		if i < 0 {
			continue
		}
		switch b.Status {
		case inbox.StatusPending, inboxstore.BacklogHeld:
			out[i].Pending += b.Count // Held ones included, as before.
		case inbox.StatusFailed:
			out[i].Failed = b.Count
		}
	}
	return out, nil
}

// Pause pauses a configured source, and reports whether it was running.
func (a *Admin) Pause(ctx context.Context, source, by, reason string) (bool, error) {
	if err := a.checkSource(source); err != nil {
		return false, err
	}
	return a.inbox.Pause(ctx, source, by, reason)
}

// Resume resumes a paused source (configured or not, so that a pause left
// by an old config can be lifted) and returns how many held events it
// enqueued; inboxstore.ErrNotPaused when it was not paused.
func (a *Admin) Resume(ctx context.Context, source string) (int, error) {
	return a.inbox.Resume(ctx, &inboxstore.ResumeParams{Source: source, Client: a.config.Client, QueueFor: a.config.QueueFor})
}

// Show returns one event's row.
func (a *Admin) Show(ctx context.Context, source, eventID string) (*inboxstore.EventInfo, error) {
	return a.inbox.Lookup(ctx, source, eventID)
}

// List returns the rows params selects, newest first.
func (a *Admin) List(ctx context.Context, params *inboxstore.ListParams) ([]inboxstore.EventInfo, error) {
	return a.inbox.List(ctx, params)
}

// Replay sends one done or failed event back to pending with a new job.
// It commits durably (inboxstore.DurableTxOptions): the API answers 2xx after it.
func (a *Admin) Replay(ctx context.Context, source, eventID string) (*inboxstore.EventInfo, error) {
	err := inboxstore.BeginDurableFunc(ctx, a.pool, func(tx pgx.Tx) error {
		_, err := a.inbox.ReplayEventTx(ctx, tx, a.config.Client, source, eventID, a.config.QueueFor)
		return err
	})
	if err != nil {
		return nil, err
	}
	return a.inbox.Lookup(ctx, source, eventID)
}

// Rejections returns a configured source's rejection samples, newest first.
func (a *Admin) Rejections(ctx context.Context, source string, limit int) ([]rejection.Sample, error) {
	if err := a.checkSource(source); err != nil {
		return nil, err
	}
	return a.rejections.List(ctx, source, limit)
}

// Stats is the inbox's state at a glance.
type Stats struct {
	// Backlog is the pending and failed rows by source, with the oldest.
	Backlog []inboxstore.Backlog `json:"backlog"`
	// Queues is River's unfinished jobs by queue and state.
	Queues []inboxstore.QueueDepth `json:"queues"`
	// Paused are the paused sources.
	Paused []inboxstore.PausedSource `json:"paused"`
}

// Stats reads the backlog, the queues' depth and the paused sources.
func (a *Admin) Stats(ctx context.Context) (*Stats, error) {
	var s Stats
	var err error
	if s.Backlog, err = a.inbox.Backlog(ctx); err != nil {
		return nil, err
	}
	if s.Queues, err = a.inbox.QueueDepths(ctx); err != nil {
		return nil, err
	}
	if s.Paused, err = a.inbox.PausedSources(ctx); err != nil {
		return nil, err
	}
	return &s, nil
}
