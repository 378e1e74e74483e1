package effect_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/effect"
)

func TestOnce(t *testing.T) {
	t.Parallel()

	t.Run("FirstThenRepeat", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		ctx := context.Background()
		first, err := effect.Once(ctx, db.Pool, "charge", "ch_123")
		require.NoError(t, err)
		require.True(t, first)
		first, err = effect.Once(ctx, db.Pool, "charge", "ch_123")
		require.NoError(t, err)
		require.False(t, first)
		first, err = effect.Once(ctx, db.Pool, "refund", "ch_123")
		require.NoError(t, err)
		require.True(t, first, "scopes are independent")
	})

	t.Run("EmptyKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		_, err := effect.Once(context.Background(), db.Pool, "charge", "")
		require.ErrorContains(t, err, "needs a scope and a key")
	})

	t.Run("PruneMakesAKeyNewAgain", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		ctx := context.Background()
		_, err := effect.Once(ctx, db.Pool, "charge", "old")
		require.NoError(t, err)
		_, err = db.Pool.Exec(ctx, `UPDATE hookinbox_effect_once SET created_at = now() - interval '10 days'`)
		require.NoError(t, err)
		_, err = effect.Once(ctx, db.Pool, "charge", "new")
		require.NoError(t, err)
		n, err := effect.PruneOnce(ctx, db.Pool, time.Now().Add(-24*time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		first, err := effect.Once(ctx, db.Pool, "charge", "old")
		require.NoError(t, err)
		require.True(t, first)
		first, err = effect.Once(ctx, db.Pool, "charge", "new")
		require.NoError(t, err)
		require.False(t, first)
	})

	// Fifty transactions claim one key at once. The first holds it while the
	// other 49 wait on the unique key; it rolls back, so exactly one of the
	// waiters becomes first, commits the effect, and the remaining 48 see it
	// applied. One effect row results.
	t.Run("FiftyConcurrentTransactions", func(t *testing.T) {
		t.Parallel()
		const n = 50
		db := dbtest.New(t)
		ctx := context.Background()
		_, err := db.Pool.Exec(ctx, `CREATE TABLE charges (id text NOT NULL)`)
		require.NoError(t, err)
		cfg := db.Pool.Config()
		cfg.MaxConns = n + 1
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		defer pool.Close()

		type result struct {
			first  bool
			decide chan bool // true: commit; false: roll back
		}
		results := make(chan result, n)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					first, err := effect.Once(ctx, tx, "charge", "ch_123")
					if err != nil {
						return err
					}
					r := result{first: first, decide: make(chan bool)}
					results <- r
					if !first {
						return nil
					}
					if _, err := tx.Exec(ctx, `INSERT INTO charges VALUES ('ch_123')`); err != nil {
						return err
					}
					if !<-r.decide {
						return errRolledBack
					}
					return nil
				})
			}()
		}
		firsts := 0
		for i := range n {
			r := <-results
			if !r.first {
				continue
			}
			firsts++
			// Everyone not yet answered waits on the key this one holds.
			db.WaitForLockWaiters(t, n-1-i)
			r.decide <- firsts > 1 // the first winner rolls back, the second commits
		}
		wg.Wait()
		close(errs)
		rolledBack := 0
		for err := range errs {
			if errors.Is(err, errRolledBack) {
				rolledBack++
				continue
			}
			require.NoError(t, err)
		}
		require.Equal(t, 2, firsts, "the rolled-back claim hands the key to exactly one waiter")
		require.Equal(t, 1, rolledBack)
		var charges int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM charges`).Scan(&charges))
		require.Equal(t, 1, charges)
	})
}

type rolledBackError struct{}

func (rolledBackError) Error() string { return "rolled back on purpose" }

var errRolledBack error = rolledBackError{}
