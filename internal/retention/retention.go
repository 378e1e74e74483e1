// Package retention bounds the inbox: it deletes each source's done rows
// once they are older than the source's retention, and erases their body,
// headers and payload once they are older than its payload retention, in
// small batches that never hold a lock the receiver waits on for long.
// Failed rows (the dead letters) are never deleted; pending rows are never
// touched.
//
// pkg/worker runs a Pruner as a periodic River job; `inboxctl prune` runs
// one by hand, or counts what it would do with --dry-run.
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// RetentionDefault is a source's retention when its config sets none (see
// config.SourceConfig.Retention): 30 days, the longest redelivery window of
// the providers hookinbox ships (stripe's manual resend, adyen's retry
// queue; see provider.RedeliveryWindow).
const RetentionDefault = 30 * 24 * time.Hour

// BatchDefault is Config.Batch's default: rows per statement. At about a
// millisecond per hundred rows, a batch holds its row locks for
// milliseconds.
const BatchDefault = 1000

// ErrInsideRedeliveryWindow is wrapped by Policy.Check, and so by every
// pass of a Pruner given such a policy, when a retention is shorter than
// the provider's redelivery window.
var ErrInsideRedeliveryWindow = errors.New("retention is shorter than the provider's redelivery window")

// Policy is one source's retention.
type Policy struct {
	// Source is the source's name.
	Source string
	// Provider is the source's provider, whose redelivery window
	// (provider.RedeliveryWindow) Retention must outlive. Empty, or a
	// provider whose window is unknown (hmac), enforces none.
	Provider string
	// Retention is how long a done row is kept, from its receipt. It must
	// outlive the provider's redelivery window, or a redelivery after the
	// prune would be processed twice (see Check). 0 keeps rows for ever.
	Retention time.Duration
	// PayloadRetention, when set, is how long a done row keeps its body,
	// headers and payload; the row and its keys stay until Retention.
	PayloadRetention time.Duration
}

// Check returns an error wrapping ErrInsideRedeliveryWindow when p would
// delete done rows that the provider may still deliver again: a redelivery
// after the prune would be claimed as a new event and processed twice. It is
// the one place that decides: config.Load refuses such a source's retention
// with its message, for the daemons and for every inboxctl command that
// writes the inbox, and a Pruner refuses to run such a policy.
func (p *Policy) Check() error {
	window := provider.RedeliveryWindow(p.Provider)
	if p.Retention > 0 && p.Retention < window {
		return &windowError{msg: fmt.Sprintf("%s is shorter than %s's redelivery window (%s): an event redelivered after its row "+
			"is pruned would be processed twice; use at least %s", p.Retention, p.Provider, window, window)}
	}
	return nil
}

// windowError is Check's error: its own message, matching
// ErrInsideRedeliveryWindow.
type windowError struct{ msg string }

func (e *windowError) Error() string { return e.msg }
func (e *windowError) Unwrap() error { return ErrInsideRedeliveryWindow }

// Config configures a Pruner.
type Config struct {
	// Policies are the sources' retentions. A source without one is left
	// alone. A pass refuses to run, deleting nothing, while one of them
	// fails Policy.Check.
	Policies []Policy
	// Batch is the rows one statement deletes or erases. Defaults to 1000.
	Batch int
	// Now is the process's clock, which times the batches for the progress
	// log. It never decides what is old: every cutoff is the database's
	// now() minus a retention, compared with received_at, which is the
	// database's clock too. Defaults to time.Now.
	Now func() time.Time
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Pruner applies the sources' retention policies.
type Pruner struct {
	store  *inboxstore.Store
	config Config
}

// NewPruner returns a Pruner working through store.
func NewPruner(store *inboxstore.Store, config *Config) *Pruner {
	c := *config
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return &Pruner{store: store, config: c}
}

// SourceResult is what a pass did (or, dry, would do) to one source.
type SourceResult struct {
	Source string `json:"source"`
	// Retention is the source's retention: done rows received longer ago
	// than this (by the database's clock) go. 0 keeps them.
	Retention time.Duration `json:"retention,omitempty"`
	// PayloadRetention is the source's payload retention. 0 keeps payloads.
	PayloadRetention time.Duration `json:"payload_retention,omitempty"`
	// Deleted counts deleted rows; Erased rows whose payload was erased.
	Deleted int64 `json:"deleted"`
	Erased  int64 `json:"erased"`
	// Batches counts the statements run.
	Batches int `json:"batches"`
}

// Run applies every policy once, until nothing is left to do or ctx ends,
// and logs its progress. A failed statement stops the pass; the rows done
// so far stay done, and the next pass continues. A policy that fails
// Policy.Check stops it before it changes anything, with that error.
func (p *Pruner) Run(ctx context.Context) ([]SourceResult, error) {
	return p.pass(ctx, false)
}

// DryRun counts what Run would do, changing nothing; it refuses the
// policies Run refuses.
func (p *Pruner) DryRun(ctx context.Context) ([]SourceResult, error) {
	return p.pass(ctx, true)
}

func (p *Pruner) pass(ctx context.Context, dry bool) ([]SourceResult, error) {
	for _, pol := range p.config.Policies {
		if err := pol.Check(); err != nil {
			return nil, fmt.Errorf("retention: source %s: %w", pol.Source, err)
		}
	}
	results := make([]SourceResult, 0, len(p.config.Policies))
	for _, pol := range p.config.Policies {
		res := SourceResult{Source: pol.Source, Retention: max(pol.Retention, 0), PayloadRetention: max(pol.PayloadRetention, 0)}
		err := p.prune(ctx, dry, &res)
		if err == nil && res.PayloadRetention > 0 {
			err = p.erase(ctx, dry, &res)
		}
		results = append(results, res)
		if err != nil {
			return results, err
		}
		if !dry && res.Deleted+res.Erased > 0 {
			p.config.Logger.Info("retention pass done for source", zap.String("source", pol.Source),
				zap.Int64("deleted", res.Deleted), zap.Int64("erased", res.Erased), zap.Int("batches", res.Batches))
		}
	}
	return results, nil
}

// logEvery is how many batches go by between progress lines.
const logEvery = 100

func (p *Pruner) prune(ctx context.Context, dry bool, res *SourceResult) error {
	if res.Retention == 0 {
		return nil
	}
	if dry {
		n, err := p.store.CountPrunable(ctx, res.Source, res.Retention)
		res.Deleted = n
		return err
	}
	return p.batches(ctx, res, &res.Deleted, "pruning", func() (int64, error) {
		return p.store.PruneBatch(ctx, res.Source, res.Retention, p.config.Batch)
	})
}

func (p *Pruner) erase(ctx context.Context, dry bool, res *SourceResult) error {
	if dry {
		n, err := p.store.CountErasable(ctx, res.Source, res.Retention, res.PayloadRetention)
		res.Erased = n
		return err
	}
	return p.batches(ctx, res, &res.Erased, "erasing payloads", func() (int64, error) {
		return p.store.ErasePayloadsBatch(ctx, res.Source, res.Retention, res.PayloadRetention, p.config.Batch)
	})
}

// batches runs one statement after another until one touches fewer rows
// than a batch, adding to *count.
func (p *Pruner) batches(ctx context.Context, res *SourceResult, count *int64, what string, batch func() (int64, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := p.config.Now()
		n, err := batch()
		if err != nil {
			return err
		}
		*count += n
		res.Batches++
		if res.Batches%logEvery == 0 {
			p.config.Logger.Info("retention progress", zap.String("source", res.Source), zap.String("step", what),
				zap.Int64("rows", *count), zap.Int("batches", res.Batches), zap.Duration("last_batch", p.config.Now().Sub(start)))
		}
		if n < int64(p.config.Batch) {
			return nil
		}
	}
}
