package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// Start-up retry defaults: the first retry after retryInitialDefault, each
// next one after twice the delay, never more than retryMaxDefault.
const (
	retryInitialDefault = 250 * time.Millisecond
	retryMaxDefault     = 10 * time.Second
)

// errPoolTooLarge is returned by AwaitSchema when database.max_conns is more
// than the server lets ordinary clients open: the pool would meet "too many
// clients already" under load, and so would the other clients of the
// database.
var errPoolTooLarge = errors.New("database.max_conns exceeds what the PostgreSQL server allows")

// checkTimeout bounds one attempt at CheckSchema.
const checkTimeout = operator.CheckTimeout

// Retry is how a daemon retries reaching its database at start-up: after
// Initial, then doubling up to Max, for as long as it runs.
type Retry struct {
	// Initial is the first delay. Defaults to 250ms.
	Initial time.Duration
	// Max caps the delay. Defaults to 10s.
	Max time.Duration
}

// CheckSchema tries once to reach the database and check that its schema has
// e.Sets (and River's tables). When the schema is older, the error wraps
// schema.ErrTooOld and names the command that migrates (MigrateCommand);
// when PostgreSQL cannot be reached, it says so.
func (e *Env) CheckSchema(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return e.explain(schema.Check(ctx, e.Pool, e.Sets...))
}

// explain adds the remedy to a database error: the migrate command for a
// schema too old, "cannot reach PostgreSQL" for a failed connection.
func (e *Env) explain(err error) error {
	if errors.Is(err, schema.ErrTooOld) {
		return fmt.Errorf("%w; run `%s`", err, e.MigrateCommand())
	}
	return operator.Unreachable(err)
}

// CheckPoolBudget returns an error wrapping errPoolTooLarge when the pool's
// size (database.max_conns) is more than the server's max_connections less
// its reserved connections (superuser_reserved_connections, and
// reserved_connections on PostgreSQL 16 and later), naming both numbers.
// It says nothing of the other processes' pools: their sum is the
// deployment's to budget. Behind a transaction pooler (database.pooler:
// transaction) it checks nothing: the pooler, not the pool, bounds the
// server's connections, and the pool may rightly be larger.
func (e *Env) CheckPoolBudget(ctx context.Context) error {
	if e.Config.Database.TransactionPooled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var maxConns, superReserved, reserved int32
	err := e.Pool.QueryRow(ctx, `
SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,
       coalesce(current_setting('reserved_connections', true), '0')::int`).Scan(&maxConns, &superReserved, &reserved)
	if err != nil {
		return e.explain(fmt.Errorf("read the server's connection limits: %w", err))
	}
	allowed := maxConns - superReserved - reserved
	if size := e.Pool.Config().MaxConns; size > allowed {
		return fmt.Errorf("%w: database.max_conns is %d, but the server allows %d connections (max_connections %d less %d reserved); "+
			"lower database.max_conns, keeping the sum over every receiver and worker replica within %d",
			errPoolTooLarge, size, allowed, maxConns, superReserved+reserved, allowed)
	}
	return nil
}

// CheckDurability reads what a 2xx survives on the server
// (operator.ReadDurability, as inboxctl doctor does)
// and logs it, one line; it returns an error wrapping
// inboxstore.ErrDurability when that is less than
// database.durability.require.
func (e *Env) CheckDurability(ctx context.Context) error {
	dc := e.Config.Database.Durability
	d, err := operator.ReadDurability(ctx, e.Pool, e.Config)
	if err != nil {
		return err
	}
	e.Logger.Info(d.String(), zap.String("fsync", d.Fsync), zap.String("full_page_writes", d.FullPageWrites),
		zap.String("synchronous_commit", d.Session), zap.String("claim_commit", d.Claim),
		zap.String("synchronous_standby", d.StandbyState()), zap.String("require", dc.Require))
	return d.Meets(dc.Require)
}

// AwaitSchema retries CheckSchema until it passes, waiting e.Retry between
// attempts and logging each failure with the attempt number, the delay
// before the next one and the error. It returns nil once the schema is
// there, and ctx's error when ctx ends first. Once the schema checks out it
// checks the pool's size against the server (CheckPoolBudget) and returns
// that error, which no retry mends, then says what a 2xx survives
// (CheckDurability).
//
// A schema that is reachable but older is retried too, logged at error level
// with the migrate command: in Kubernetes the pod then waits, unready, for
// the migration Job instead of crash-looping. So is a server that gives
// less durability than database.durability.require, logged at error level
// with what is missing: a synchronous standby may be on its way.
func (e *Env) AwaitSchema(ctx context.Context) error {
	delay := cmp.Or(e.Retry.Initial, retryInitialDefault)
	maxDelay := cmp.Or(e.Retry.Max, retryMaxDefault)
	for attempt := 1; ; attempt++ {
		err := e.CheckSchema(ctx)
		if err == nil {
			err = e.CheckPoolBudget(ctx)
			if errors.Is(err, errPoolTooLarge) {
				return err
			}
		}
		if err == nil {
			err = e.CheckDurability(ctx)
		}
		if err == nil {
			e.Logger.Info("database ready", zap.Int("attempt", attempt))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fields := []zap.Field{zap.Int("attempt", attempt), zap.Duration("retry_in", delay), zap.Error(err)}
		switch {
		case errors.Is(err, schema.ErrTooOld):
			e.Logger.Error("database schema is too old; waiting for `"+e.MigrateCommand()+"`", fields...)
		case errors.Is(err, inboxstore.ErrDurability):
			e.Logger.Error("waiting for the durability database.durability.require asks for", fields...)
		default:
			e.Logger.Warn("waiting for the database", fields...)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}
