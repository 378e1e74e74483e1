package fairshare_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/fairshare"
)

// fill acquires for key until refused, and returns how many it got and
// the refusal.
func fill(b *fairshare.Budget, key string) (int, error) {
	for n := 0; ; n++ {
		if err := b.Acquire(key); err != nil {
			return n, err
		}
	}
}

func TestBudget(t *testing.T) {
	t.Parallel()

	t.Run("AStormingKeyLeavesTheOthersTheirShare", func(t *testing.T) {
		t.Parallel()
		b := fairshare.New(16, 0.5)
		n, err := fill(b, "storm")
		require.Equal(t, 8, n)
		require.ErrorIs(t, err, fairshare.ErrShare)
		// A second key gets half of what the first leaves, a third half
		// of the rest: a slot stays free for a newcomer.
		n, err = fill(b, "second")
		require.Equal(t, 4, n)
		require.ErrorIs(t, err, fairshare.ErrShare)
		n, _ = fill(b, "third")
		require.Equal(t, 2, n)
		n, _ = fill(b, "fourth")
		require.Equal(t, 1, n)
		// At least one slot, while one is free.
		n, _ = fill(b, "fifth")
		require.Equal(t, 1, n)
		require.Equal(t, 16, b.Held())
		require.ErrorIs(t, b.Acquire("sixth"), fairshare.ErrFull)
	})

	t.Run("AKeyOverItsLimitWaitsUntilItDropsUnder", func(t *testing.T) {
		t.Parallel()
		b := fairshare.New(16, 0.5)
		_, _ = fill(b, "storm") // 8
		n, err := fill(b, "quiet")
		require.Equal(t, 4, n)
		require.ErrorIs(t, err, fairshare.ErrShare)
		// The others now hold 4: the storm's limit is 6, and it holds 8.
		require.Equal(t, 6, b.Limit("storm"))
		for range 2 {
			b.Release("storm")
			require.ErrorIs(t, b.Acquire("storm"), fairshare.ErrShare)
		}
		b.Release("storm") // 5
		require.NoError(t, b.Acquire("storm"))
		require.ErrorIs(t, b.Acquire("storm"), fairshare.ErrShare)
	})

	t.Run("ShareOneIsTheWholeBudget", func(t *testing.T) {
		t.Parallel()
		b := fairshare.New(16, 1)
		n, err := fill(b, "storm")
		require.Equal(t, 16, n)
		require.ErrorIs(t, err, fairshare.ErrFull)
		require.ErrorIs(t, b.Acquire("quiet"), fairshare.ErrFull)
		b.Release("storm")
		require.NoError(t, b.Acquire("quiet"))
	})

	t.Run("ABudgetOfOneStillServes", func(t *testing.T) {
		t.Parallel()
		b := fairshare.New(1, 0.5)
		require.NoError(t, b.Acquire("a"))
		require.ErrorIs(t, b.Acquire("b"), fairshare.ErrFull)
		b.Release("a")
		require.NoError(t, b.Acquire("b"))
	})

	t.Run("RoundingDoesNotLoseASlot", func(t *testing.T) {
		t.Parallel()
		b := fairshare.New(100, 0.29)
		n, _ := fill(b, "a")
		require.Equal(t, 29, n)
	})

	t.Run("ConcurrentUseBalances", func(t *testing.T) {
		t.Parallel()
		b := fairshare.New(64, 0.5)
		var wg sync.WaitGroup
		for _, key := range []string{"a", "b", "c", "d"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 1000 {
					if b.Acquire(key) == nil {
						b.Release(key)
					}
				}
			}()
		}
		wg.Wait()
		require.Zero(t, b.Held())
	})
}
