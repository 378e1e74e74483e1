package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/limiter"
)

// observe feeds n samples of latency d to l, with demand.
func observe(l *limiter.Limiter, n int, d time.Duration, demand bool) {
	for range n {
		l.Observe(d, demand)
	}
}

// rounds is enough samples for every decision up to a limit of 16.
const rounds = 64 * limiter.RoundMin

func TestLimiter(t *testing.T) {
	t.Parallel()

	t.Run("GrowsToItsMaxWhileLatencyStaysAtTheFloorAndWorkWaits", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(8)
		require.Equal(t, 1, l.Limit())
		observe(l, limiter.RoundMin, time.Millisecond, true)
		require.Equal(t, 2, l.Limit(), "one round at the floor with demand adds one")
		observe(l, rounds, time.Millisecond, true)
		require.Equal(t, 8, l.Limit())
		require.Equal(t, time.Millisecond, l.Floor())
	})

	t.Run("DoesNotGrowWithoutDemand", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(8)
		observe(l, rounds, time.Millisecond, false)
		require.Equal(t, 1, l.Limit())
	})

	t.Run("BacksOffWhenLatencyPassesTwiceTheFloor", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(16)
		observe(l, rounds, time.Millisecond, true)
		require.Equal(t, 16, l.Limit())
		// Under twice the floor is no congestion: the limit holds.
		observe(l, limiter.RoundMin*16, 1900*time.Microsecond, false)
		require.Equal(t, 16, l.Limit())
		// Five times the floor: the smoothed latency passes twice the
		// floor within a round, and each congested round cuts a quarter.
		observe(l, 16, 5*time.Millisecond, true)
		require.Less(t, l.Limit(), 16)
		observe(l, 120, 5*time.Millisecond, true)
		require.Equal(t, 1, l.Limit(), "never below 1")
	})

	t.Run("RecoversOnceLatencyFallsBack", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(8)
		observe(l, rounds, time.Millisecond, true)
		observe(l, rounds, 10*time.Millisecond, true)
		require.Equal(t, 1, l.Limit())
		observe(l, rounds, time.Millisecond, true)
		require.Equal(t, 8, l.Limit())
	})

	// A floor from a quieter past is forgotten: under a latency that stays
	// at three times it, the limit first comes down, then the floor rises
	// to within reach and the limit grows again.
	t.Run("FloorDriftsUpUnderALastingLoad", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(8)
		observe(l, limiter.RoundMin*4, time.Millisecond, true)
		observe(l, limiter.RoundMin*8, 3*time.Millisecond, true)
		low := l.Limit()
		require.Less(t, low, 5)
		observe(l, 2000, 3*time.Millisecond, true)
		require.Greater(t, l.Floor(), 1500*time.Microsecond)
		require.Equal(t, 8, l.Limit())
	})

	t.Run("IgnoresSamplesThatAreNotLatencies", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(4)
		observe(l, rounds, 0, true)
		require.Equal(t, 1, l.Limit())
		require.Zero(t, l.Floor())
	})
}

func TestLimiterPermits(t *testing.T) {
	t.Parallel()
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	t.Run("NoMoreThanTheLimitAtOnce", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(4)
		require.NoError(t, l.Acquire(context.Background()))
		require.ErrorIs(t, l.Acquire(ended), context.Canceled, "the limit is 1: a second permit waits")
		require.Equal(t, 1, l.InUse())
		l.Release()
		require.NoError(t, l.Acquire(ended), "a free permit is handed out at once")
		require.Equal(t, 1, l.InUse())
	})

	t.Run("AWaiterGetsTheReleasedPermit", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(4)
		require.NoError(t, l.Acquire(context.Background()))
		got := make(chan error, 1)
		go func() { got <- l.Acquire(context.Background()) }()
		require.Eventually(t, func() bool { return l.Waiting() == 1 }, 10*time.Second, time.Millisecond)
		require.False(t, l.TryAcquire(), "the only permit is out")
		l.Release()
		require.NoError(t, <-got)
		require.Equal(t, 1, l.InUse())
		require.Zero(t, l.Waiting())
	})

	t.Run("AGrowingLimitLetsWaitersIn", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(4)
		require.NoError(t, l.Acquire(context.Background()))
		got := make(chan error, 1)
		go func() { got <- l.Acquire(context.Background()) }()
		// Whether the waiter queued before the limit grew or after, it gets
		// the second permit without anyone releasing the first.
		observe(l, limiter.RoundMin, time.Millisecond, true)
		require.Equal(t, 2, l.Limit())
		require.NoError(t, <-got)
		require.Equal(t, 2, l.InUse())
	})

	t.Run("AShrunkLimitHoldsBackNewPermitsUntilEnoughAreBack", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(4)
		observe(l, rounds, time.Millisecond, true)
		require.Equal(t, 4, l.Limit())
		for range 4 {
			require.NoError(t, l.Acquire(context.Background()))
		}
		observe(l, rounds, 10*time.Millisecond, false)
		require.Equal(t, 1, l.Limit())
		for range 3 {
			l.Release()
			require.ErrorIs(t, l.Acquire(ended), context.Canceled)
		}
		l.Release()
		require.NoError(t, l.Acquire(ended))
	})

	t.Run("AWaiterThatGivesUpLeavesNoPermitTaken", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(4)
		require.NoError(t, l.Acquire(context.Background()))
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() { got <- l.Acquire(ctx) }()
		cancel()
		require.ErrorIs(t, <-got, context.Canceled)
		l.Release()
		require.Zero(t, l.InUse())
		require.NoError(t, l.Acquire(ended))
	})

	t.Run("TryAcquireTakesOnlyAFreePermitAndWakeSaysWhenOneIs", func(t *testing.T) {
		t.Parallel()
		l := limiter.New(4)
		require.Equal(t, 1, l.Available())
		require.True(t, l.TryAcquire())
		require.Zero(t, l.Available())
		wake := l.Wake()
		require.False(t, l.TryAcquire())
		select {
		case <-wake:
			t.Fatal("woken with no permit free")
		default:
		}
		l.Release()
		<-wake
		require.True(t, l.TryAcquire())
	})
}
