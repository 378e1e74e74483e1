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

	"github.com/hookinbox/hookinbox/pkg/inbox"
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
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Pruner applies the sources' retention policies.
type Pruner struct {
	store  *inbox.Store
	config Config
}

// NewPruner returns a Pruner working through store.
func NewPruner(store *inbox.Store, config *Config) *Pruner {
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
	// Cutoff is the retention cutoff: done rows received before it go.
	Cutoff *time.Time `json:"cutoff,omitempty"`
	// PayloadCutoff is the payload retention cutoff.
	PayloadCutoff *time.Time `json:"payload_cutoff,omitempty"`
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
	now := p.config.Now()
	results := make([]SourceResult, 0, len(p.config.Policies))
	for _, pol := range p.config.Policies {
		res := SourceResult{Source: pol.Source}
		var cutoff time.Time
		if pol.Retention > 0 {
			cutoff = now.Add(-pol.Retention)
			res.Cutoff = &cutoff
		}
		err := p.prune(ctx, dry, &res, cutoff)
		if err == nil && pol.PayloadRetention > 0 {
			payloadCutoff := now.Add(-pol.PayloadRetention)
			res.PayloadCutoff = &payloadCutoff
			err = p.erase(ctx, dry, &res, cutoff, payloadCutoff)
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

func (p *Pruner) prune(ctx context.Context, dry bool, res *SourceResult, cutoff time.Time) error {
	if cutoff.IsZero() {
		return nil
	}
	if dry {
		n, err := p.store.CountPrunable(ctx, res.Source, cutoff)
		res.Deleted = n
		return err
	}
	return p.batches(ctx, res, &res.Deleted, "pruning", func() (int64, error) {
		return p.store.PruneBatch(ctx, res.Source, cutoff, p.config.Batch)
	})
}

func (p *Pruner) erase(ctx context.Context, dry bool, res *SourceResult, from, before time.Time) error {
	if dry {
		n, err := p.store.CountErasable(ctx, res.Source, from, before)
		res.Erased = n
		return err
	}
	return p.batches(ctx, res, &res.Erased, "erasing payloads", func() (int64, error) {
		return p.store.ErasePayloadsBatch(ctx, res.Source, from, before, p.config.Batch)
	})
}

// batches runs one statement after another until one touches fewer rows
// than a batch, adding to *count.
func (p *Pruner) batches(ctx context.Context, res *SourceResult, count *int64, what string, batch func() (int64, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		n, err := batch()
		if err != nil {
			return err
		}
		*count += n
		res.Batches++
		if res.Batches%logEvery == 0 {
			p.config.Logger.Info("retention progress", zap.String("source", res.Source), zap.String("step", what),
				zap.Int64("rows", *count), zap.Int("batches", res.Batches), zap.Duration("last_batch", time.Since(start)))
		}
		if n < int64(p.config.Batch) {
			return nil
		}
	}
}
