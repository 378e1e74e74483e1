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
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
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

// Policy is one source's retention.
type Policy struct {
	// Source is the source's name.
	Source string
	// Retention is how long a done row is kept, from its receipt. It must
	// outlive the provider's redelivery window, or a redelivery after the
	// prune would be processed twice. 0 keeps rows for ever.
	Retention time.Duration
	// PayloadRetention, when set, is how long a done row keeps its body,
	// headers and payload; the row and its keys stay until Retention.
	PayloadRetention time.Duration
}

// Config configures a Pruner.
type Config struct {
	// Policies are the sources' retentions. A source without one is left
	// alone.
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
// so far stay done, and the next pass continues.
func (p *Pruner) Run(ctx context.Context) ([]SourceResult, error) {
	return p.pass(ctx, false)
}

// DryRun counts what Run would do, changing nothing.
func (p *Pruner) DryRun(ctx context.Context) ([]SourceResult, error) {
	return p.pass(ctx, true)
}

func (p *Pruner) pass(ctx context.Context, dry bool) ([]SourceResult, error) {
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
