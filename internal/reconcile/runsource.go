package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// ErrNotReconciled is returned by RunSource for a source that has no
// reconciliation configured.
var ErrNotReconciled = errors.New("reconcile: the source has no reconciliation configured")

// ErrRunning is returned by RunSource when another run of the source (the
// scheduled job, or inboxctl reconcile) holds its lock.
var ErrRunning = errors.New("reconcile: the source is being reconciled now")

// lockClass is the first key of every source's advisory lock
// (pg_try_advisory_xact_lock(lockClass, hashtext(source))): "reco".
const lockClass = 0x7265636f

// RunParams say what one run of a source's reconciliation covers.
type RunParams struct {
	// Since is the oldest time listed. Zero lists from the source's
	// watermark less its lookback, as the scheduled job does.
	Since time.Time
	// Until, unless zero, is the newest time listed; zero lists until now.
	Until time.Time
	// DryRun lists what the inbox lacks and changes nothing: it claims
	// nothing, asks for no redelivery, takes no lock and leaves the
	// watermark.
	DryRun bool
}

// Report is what RunSource did.
type Report struct {
	*Result
	// Provider is the source's provider ("github": Redelivered and Missing
	// are deliveries asked for again, or that would be).
	Provider string
	// Window is what the run listed (Until zero: until the run's start).
	Window Window
	// Advanced is the watermark the run recorded, zero when it moved none
	// (a dry run, a failed one, or one whose window did not cover the
	// scheduled run's).
	Advanced time.Time
}

// RunSource runs the reconciliation of the source named name once, now,
// as its scheduled job does (Work calls it). Unless params.DryRun, it first
// takes the source's lock, a transaction-scoped advisory lock held for the
// run, so that the job and inboxctl reconcile never run one source at once
// (ErrRunning when another holds it), then reads the watermark under it. A
// run that finishes moves the watermark, never back, to its start when its
// window covered the scheduled run's: from the watermark less the lookback
// (or earlier) until now. A rate-limited run returns a *RateLimitedError and
// logs when it may try again.
func (w *Worker) RunSource(ctx context.Context, name string, params *RunParams) (*Report, error) {
	src := w.sources[name]
	if src == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotReconciled, name)
	}
	if !params.DryRun {
		unlock, err := w.lock(ctx, name)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	start := w.now()
	mark, ok, err := w.watermarks.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	scheduled := since(start, mark, ok, src.Lookback, src.Window)
	rep := &Report{Provider: src.Provider, Window: Window{Since: scheduled, Until: params.Until}}
	if !params.Since.IsZero() {
		// Never before what the provider lists (or GitHub redelivers).
		rep.Window.Since = params.Since
		if floor := start.Add(-src.Window); src.Window > 0 && rep.Window.Since.Before(floor) {
			rep.Window.Since = floor
		}
	}
	rep.Result, err = w.run(ctx, src, rep.Window, params.DryRun)
	log := w.logger.With(zap.String("source", name), zap.Time("since", rep.Window.Since), zap.Bool("dry_run", params.DryRun),
		zap.Int("fetched", rep.Fetched), zap.Int("new", rep.New), zap.Int("duplicates", rep.Duplicates), zap.Int("twins", rep.Twins),
		zap.Duration("took", w.now().Sub(start)))
	if !params.Until.IsZero() {
		log = log.With(zap.Time("until", params.Until))
	}
	if src.GitHub != nil {
		log = log.With(zap.Int("redelivered", rep.Redelivered), zap.Strings("abandoned", rep.Abandoned))
	}
	if params.DryRun {
		if err != nil {
			return rep, err
		}
		log.Info("reconciliation dry run")
		return rep, nil
	}
	var limited *RateLimitedError
	switch {
	case errors.As(err, &limited):
		w.metrics.Run(name, rep.Fetched, rep.New, rep.Duplicates, rep.Twins, rep.Redelivered, len(rep.Abandoned), "rate_limited")
		log.Warn("reconciliation rate limited; the watermark stays until a run at retry_at",
			zap.String("call", limited.Call), zap.Time("retry_at", limited.Until))
		return rep, err
	case err != nil:
		w.metrics.Run(name, rep.Fetched, rep.New, rep.Duplicates, rep.Twins, rep.Redelivered, len(rep.Abandoned), "failed")
		log.Warn("reconciliation failed; the watermark stays", zap.Error(err))
		return rep, err
	}
	w.metrics.Run(name, rep.Fetched, rep.New, rep.Duplicates, rep.Twins, rep.Redelivered, len(rep.Abandoned), "ok")
	if params.Until.IsZero() && !rep.Window.Since.After(scheduled) {
		if err := w.watermarks.Advance(ctx, name, start); err != nil {
			return rep, err
		}
		rep.Advanced = start
		w.metrics.Watermark(name, start)
	}
	switch {
	case len(rep.Abandoned) > 0:
		log.Error("reconciliation gave up on deliveries the provider redelivered in vain; see the source's rejection samples")
	case rep.New > 0 || rep.Redelivered > 0:
		log.Warn("reconciliation found events the webhooks missed")
	default:
		log.Info("reconciled")
	}
	return rep, nil
}

// lock takes source's advisory lock in a transaction of its own, held
// until the returned func rolls it back. The transaction takes no snapshot
// between statements, so it holds back no vacuum while the run lasts.
func (w *Worker) lock(ctx context.Context, source string) (func(), error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile: lock %s: %w", source, err)
	}
	unlock := func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, lockClass, source).Scan(&got); err != nil {
		unlock()
		return nil, fmt.Errorf("reconcile: lock %s: %w", source, err)
	}
	if !got {
		unlock()
		return nil, fmt.Errorf("%w: %q", ErrRunning, source)
	}
	return unlock, nil
}

// run reconciles src once within window, or only lists what it lacks.
func (w *Worker) run(ctx context.Context, src *Source, window Window, dryRun bool) (*Result, error) {
	if src.GitHub != nil {
		return src.GitHub.Reconcile(ctx, window, Known(inboxstore.New(w.pool), src.Name), dryRun)
	}
	client := w.client
	if client == nil {
		var err error
		if client, err = river.ClientFromContextSafely[pgx.Tx](ctx); err != nil {
			return &Result{}, err
		}
	}
	ingester := inboxstore.NewIngester(w.pool, client, &inboxstore.IngesterConfig{QueueFor: w.queueFor})
	var claimer Claimer = ingester
	if dryRun {
		claimer = DryRun(ingester)
	}
	return Run(ctx, &Params{Source: src.Name, Provider: src.Provider, Fetcher: src.Fetcher, Since: window.Since, Until: window.Until, Claimer: claimer})
}
