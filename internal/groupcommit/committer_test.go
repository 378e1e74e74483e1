package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/groupcommit"
	"github.com/hookinbox/hookinbox/internal/limiter"
)

// testBundle is a Committer of ints whose flush answers each item with
// its double. With gated set, each flush reports its batch on entered and
// waits for release before it answers.
type testBundle struct {
	committer *groupcommit.Committer[int, int]
	// entered receives each flushed batch's items, when the flush starts.
	entered chan []int
	release chan struct{}
	// fail, when set, is the error of every flush.
	fail error
	// calls counts do's calls.
	calls int
}

func setup(t *testing.T, config *groupcommit.Config[int], gated bool) *testBundle {
	t.Helper()
	b := &testBundle{entered: make(chan []int, 100), release: make(chan struct{})}
	if !gated {
		close(b.release)
	}
	flush := func(_ context.Context, batch []groupcommit.Request[int]) ([]groupcommit.Result[int], error) {
		items := make([]int, len(batch))
		for i, r := range batch {
			items[i] = r.Item
		}
		b.entered <- items
		<-b.release
		if b.fail != nil {
			return nil, b.fail
		}
		results := make([]groupcommit.Result[int], len(batch))
		for i, r := range batch {
			results[i].Value = 2 * r.Item
		}
		return results, nil
	}
	b.committer = groupcommit.New(flush, config)
	b.committer.Start()
	t.Cleanup(func() {
		b.open()
		b.committer.Stop()
	})
	return b
}

// open lets every flush through, once.
func (b *testBundle) open() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

// stormOrQuiet keys the items under 100 "storm", the others "quiet".
func stormOrQuiet(i int) string {
	if i < 100 {
		return "storm"
	}
	return "quiet"
}

type answer struct {
	item, value int
	err         error
}

// do runs Do(ctx, item) in a goroutine and sends its answer on answers.
func (b *testBundle) do(ctx context.Context, item int, answers chan<- answer) {
	b.calls++
	go func() {
		v, err := b.committer.Do(ctx, item)
		answers <- answer{item: item, value: v, err: err}
	}()
}

// waitWaiting waits until n requests wait for a flusher and the collector
// has taken in every request do made (Waiting counts a request from its Do,
// so a batch formed before the collector's next turn could hold only some).
func (b *testBundle) waitWaiting(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return b.committer.Waiting() == n && b.committer.Collected() == b.calls
	}, 10*time.Second, time.Millisecond)
}

func TestCommitter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ConcurrentRequestsShareOneFlush", func(t *testing.T) {
		t.Parallel()
		// The batch goes when it is full, long before the linger ends.
		b := setup(t, &groupcommit.Config[int]{MaxSize: 4, Linger: time.Hour}, false)
		answers := make(chan answer, 4)
		for i := range 4 {
			b.do(ctx, i, answers)
		}
		require.ElementsMatch(t, []int{0, 1, 2, 3}, <-b.entered)
		for range 4 {
			a := <-answers
			require.NoError(t, a.err)
			require.Equal(t, 2*a.item, a.value, "each caller gets its own result")
		}
	})

	t.Run("LoneRequestDoesNotWaitWithoutLinger", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{MaxSize: 100}, false)
		v, err := b.committer.Do(ctx, 21)
		require.NoError(t, err)
		require.Equal(t, 42, v)
	})

	t.Run("BatchFormsWhileTheFlusherIsBusy", func(t *testing.T) {
		t.Parallel()
		// Item 0 fills a batch alone; 1 to 5 gather behind it and fill the
		// next one.
		size := func(n int) int {
			if n == 0 {
				return 5
			}
			return 1
		}
		b := setup(t, &groupcommit.Config[int]{MaxSize: 5, Size: size, Linger: time.Hour}, true)
		answers := make(chan answer, 6)
		b.do(ctx, 0, answers)
		require.Equal(t, []int{0}, <-b.entered)
		for i := 1; i <= 5; i++ {
			b.do(ctx, i, answers)
		}
		b.waitWaiting(t, 5)
		b.open()
		require.ElementsMatch(t, []int{1, 2, 3, 4, 5}, <-b.entered)
		for range 6 {
			require.NoError(t, (<-answers).err)
		}
	})

	t.Run("SizeCapsABatchAndARequestIsNeverSplit", func(t *testing.T) {
		t.Parallel()
		// An item's size is its value: 2 + 2 passes 3, and 3 waits for the
		// next batch.
		b := setup(t, &groupcommit.Config[int]{MaxSize: 3, Size: func(n int) int { return n }, Linger: time.Hour}, true)
		answers := make(chan answer, 4)
		b.do(ctx, 3, answers)
		require.Equal(t, []int{3}, <-b.entered)
		for n, item := range []int{2, 2, 3} {
			b.do(ctx, item, answers)
			b.waitWaiting(t, n+1)
		}
		b.open()
		require.Equal(t, []int{2, 2}, <-b.entered)
		require.Equal(t, []int{3}, <-b.entered)
		for range 4 {
			require.NoError(t, (<-answers).err)
		}
	})

	t.Run("ReadyBatchIsSharedAmongIdleFlushers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{MaxSize: 4, Linger: time.Hour, Flushers: 2}, true)
		answers := make(chan answer, 4)
		for i := range 4 {
			b.do(ctx, i, answers)
		}
		first, second := <-b.entered, <-b.entered
		require.Len(t, first, 2)
		require.Len(t, second, 2)
		require.ElementsMatch(t, []int{0, 1, 2, 3}, append(first, second...))
		b.open()
		for range 4 {
			require.NoError(t, (<-answers).err)
		}
	})

	t.Run("FullQueueIsRefusedAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{MaxSize: 1, QueueSize: 2}, true)
		answers := make(chan answer, 3)
		b.do(ctx, 0, answers)
		require.Equal(t, []int{0}, <-b.entered)
		b.do(ctx, 1, answers)
		b.do(ctx, 2, answers)
		b.waitWaiting(t, 2)
		_, err := b.committer.Do(ctx, 3)
		require.ErrorIs(t, err, groupcommit.ErrOverloaded)

		b.open()
		for range 3 {
			a := <-answers
			require.NoError(t, a.err)
			require.Equal(t, 2*a.item, a.value)
		}
	})

	t.Run("AKeyHoldsOnlyItsShareOfTheQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{MaxSize: 1, QueueSize: 4, Key: stormOrQuiet, Share: 0.5}, true)
		answers := make(chan answer, 4)
		b.do(ctx, 0, answers)
		require.Equal(t, []int{0}, <-b.entered)
		b.do(ctx, 1, answers)
		b.do(ctx, 2, answers)
		b.waitWaiting(t, 2)
		// Half of the queue is the storm's; the rest is kept for others.
		_, err := b.committer.Do(ctx, 3)
		require.ErrorIs(t, err, groupcommit.ErrShare)
		require.ErrorIs(t, err, groupcommit.ErrOverloaded)
		b.do(ctx, 100, answers)
		b.waitWaiting(t, 3)

		b.open()
		for range 4 {
			require.NoError(t, (<-answers).err)
		}
		// Flushed requests give their slots back.
		v, err := b.committer.Do(ctx, 3)
		require.NoError(t, err)
		require.Equal(t, 6, v)
	})

	t.Run("AKeyQueuedBehindAnotherIsInTheNextBatch", func(t *testing.T) {
		t.Parallel()
		for _, keyed := range []bool{true, false} {
			config := &groupcommit.Config[int]{MaxSize: 5, Share: 1}
			if keyed {
				config.Key = stormOrQuiet
			}
			b := setup(t, config, true)
			answers := make(chan answer, 52)
			b.do(ctx, 0, answers)
			require.Equal(t, []int{0}, <-b.entered)
			// The storm queues 50 requests behind the busy flusher, then
			// the quiet key one.
			for i := 1; i <= 50; i++ {
				b.do(ctx, i, answers)
			}
			b.waitWaiting(t, 50)
			b.do(ctx, 100, answers)
			b.waitWaiting(t, 51)
			b.open()
			next := <-b.entered
			if keyed {
				// The batch may be the quiet key's alone: the collector can
				// have shared its batch out while the storm's flush still
				// held the one flusher (only keys holding none may take the
				// last flusher), and hand that over once it frees.
				require.Contains(t, next, 100, "the quiet request takes the first turn")
			} else {
				require.Len(t, next, 5)
				require.NotContains(t, next, 100, "without keys, first come, first served")
			}
			for range 52 {
				require.NoError(t, (<-answers).err)
			}
		}
	})

	t.Run("TheLastIdleFlusherIsKeptForAKeyThatHoldsNone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{MaxSize: 5, Flushers: 2, Key: stormOrQuiet, Share: 1}, true)
		answers := make(chan answer, 12)
		b.do(ctx, 0, answers)
		require.Equal(t, []int{0}, <-b.entered)
		// The storm holds one flusher: the other is not its to take.
		for i := 1; i <= 10; i++ {
			b.do(ctx, i, answers)
		}
		b.waitWaiting(t, 10)
		b.do(ctx, 100, answers)
		require.Equal(t, []int{100}, <-b.entered, "the quiet request commits alone, beside the storm's")
		b.open()
		for range 12 {
			require.NoError(t, (<-answers).err)
		}

		// Without keys the storm takes the second flusher at once.
		b = setup(t, &groupcommit.Config[int]{MaxSize: 5, Flushers: 2}, true)
		b.do(ctx, 0, answers)
		require.Equal(t, []int{0}, <-b.entered)
		b.do(ctx, 1, answers)
		require.Equal(t, []int{1}, <-b.entered)
		b.open()
		for range 2 {
			require.NoError(t, (<-answers).err)
		}
	})

	t.Run("FlushErrorReachesEveryWaiter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{MaxSize: 3, Linger: time.Hour}, false)
		b.fail = errors.New("commit failed")
		answers := make(chan answer, 3)
		for i := range 3 {
			b.do(ctx, i, answers)
		}
		require.Len(t, <-b.entered, 3)
		for range 3 {
			require.ErrorIs(t, (<-answers).err, b.fail)
		}
	})

	t.Run("PerRequestErrorsReachOnlyTheirCallers", func(t *testing.T) {
		t.Parallel()
		c := groupcommit.New(func(_ context.Context, batch []groupcommit.Request[int]) ([]groupcommit.Result[int], error) {
			results := make([]groupcommit.Result[int], len(batch))
			for i, r := range batch {
				if r.Item%2 == 1 {
					results[i].Err = fmt.Errorf("odd %d", r.Item)
				}
			}
			return results, nil
		}, &groupcommit.Config[int]{MaxSize: 4, Linger: time.Hour})
		c.Start()
		t.Cleanup(c.Stop)
		errs := make(chan answer, 4)
		for i := range 4 {
			go func() {
				_, err := c.Do(ctx, i)
				errs <- answer{item: i, err: err}
			}()
		}
		for range 4 {
			a := <-errs
			if a.item%2 == 1 {
				require.EqualError(t, a.err, fmt.Sprintf("odd %d", a.item))
			} else {
				require.NoError(t, a.err)
			}
		}
	})

	t.Run("WaitingCallerWhoseContextEndsReturnsAtOnceAndIsLeftOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{MaxSize: 100}, true)
		answers := make(chan answer, 3)
		b.do(ctx, 0, answers)
		require.Equal(t, []int{0}, <-b.entered)
		gone, cancel := context.WithCancel(ctx)
		b.do(gone, 1, answers)
		b.waitWaiting(t, 1)
		cancel()
		a := <-answers
		require.Equal(t, 1, a.item)
		require.ErrorIs(t, a.err, context.Canceled, "answered while the flusher is still busy")

		b.do(ctx, 2, answers)
		b.waitWaiting(t, 2)
		b.open()
		require.Equal(t, []int{2}, <-b.entered, "the caller who left is not flushed")
		for range 2 {
			require.NoError(t, (<-answers).err)
		}
	})

	t.Run("CallerWhoLeavesDoesNotCancelTheBatch", func(t *testing.T) {
		t.Parallel()
		entered, release := make(chan struct{}), make(chan struct{})
		early := time.Now().Add(time.Hour)
		c := groupcommit.New(func(ctx context.Context, batch []groupcommit.Request[int]) ([]groupcommit.Result[int], error) {
			close(entered)
			<-release
			deadline, ok := ctx.Deadline()
			if !ok || !deadline.Equal(early) {
				return nil, fmt.Errorf("batch deadline %v, want the earliest %v", deadline, early)
			}
			return make([]groupcommit.Result[int], len(batch)), ctx.Err()
		}, &groupcommit.Config[int]{MaxSize: 2, Linger: time.Hour})
		c.Start()
		t.Cleanup(c.Stop)
		leaving, cancel := context.WithDeadline(ctx, early)
		defer cancel()
		staying, cancelStaying := context.WithTimeout(ctx, 2*time.Hour)
		defer cancelStaying()
		left, stayed := make(chan error, 1), make(chan error, 1)
		go func() { _, err := c.Do(leaving, 1); left <- err }()
		go func() { _, err := c.Do(staying, 2); stayed <- err }()
		<-entered
		cancel()
		require.ErrorIs(t, <-left, context.Canceled)
		close(release)
		require.NoError(t, <-stayed)
	})

	t.Run("WaitForAnswerCancelsTheBatchWhenACallerLeaves", func(t *testing.T) {
		t.Parallel()
		entered := make(chan struct{})
		c := groupcommit.New(func(ctx context.Context, _ []groupcommit.Request[int]) ([]groupcommit.Result[int], error) {
			close(entered)
			<-ctx.Done()
			return nil, fmt.Errorf("flush gave up: %w", ctx.Err())
		}, &groupcommit.Config[int]{MaxSize: 2, Linger: time.Hour, WaitForAnswer: true})
		c.Start()
		t.Cleanup(c.Stop)
		leaving, cancel := context.WithCancel(ctx)
		defer cancel()
		answers := make(chan error, 2)
		go func() { _, err := c.Do(leaving, 1); answers <- err }()
		go func() { _, err := c.Do(ctx, 2); answers <- err }()
		<-entered
		cancel()
		// Both waited for the flush's answer: its error, not their own.
		for range 2 {
			err := <-answers
			require.ErrorContains(t, err, "flush gave up")
			require.ErrorIs(t, err, context.Canceled)
		}
	})

	t.Run("StopAnswersTheWaitingRequestsAndRefusesNewOnes", func(t *testing.T) {
		t.Parallel()
		// The linger never ends: both requests sit in the collector's
		// batch.
		b := setup(t, &groupcommit.Config[int]{MaxSize: 100, Linger: time.Hour}, false)
		answers := make(chan answer, 2)
		b.do(ctx, 1, answers)
		b.do(ctx, 2, answers)
		b.waitWaiting(t, 2)
		b.committer.Stop()
		for range 2 {
			require.ErrorIs(t, (<-answers).err, groupcommit.ErrStopped)
		}
		require.Zero(t, b.committer.Waiting())
		_, err := b.committer.Do(ctx, 3)
		require.ErrorIs(t, err, groupcommit.ErrStopped)
		require.Empty(t, b.entered, "nothing was flushed")
	})

	t.Run("StopFinishesTheBatchInHand", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{}, true)
		answers := make(chan answer, 1)
		b.do(ctx, 7, answers)
		<-b.entered
		stopped := make(chan struct{})
		go func() {
			b.committer.Stop()
			close(stopped)
		}()
		b.open()
		a := <-answers
		require.NoError(t, a.err)
		require.Equal(t, 14, a.value)
		<-stopped
	})

	t.Run("StopBeforeStartAnswersTheQueue", func(t *testing.T) {
		t.Parallel()
		c := groupcommit.New(func(context.Context, []groupcommit.Request[int]) ([]groupcommit.Result[int], error) {
			return nil, errors.New("never flushed")
		}, &groupcommit.Config[int]{})
		answers := make(chan error, 1)
		go func() { _, err := c.Do(ctx, 1); answers <- err }()
		require.Eventually(t, func() bool { return c.Waiting() == 1 }, 10*time.Second, time.Millisecond)
		c.Stop()
		require.ErrorIs(t, <-answers, groupcommit.ErrStopped)
	})

	t.Run("EndedContextIsRefusedBeforeQueueing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &groupcommit.Config[int]{}, false)
		gone, cancel := context.WithCancel(ctx)
		cancel()
		_, err := b.committer.Do(gone, 1)
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, b.committer.Waiting())
	})

	t.Run("FlushWithTheWrongNumberOfResultsFailsItsBatch", func(t *testing.T) {
		t.Parallel()
		c := groupcommit.New(func(context.Context, []groupcommit.Request[int]) ([]groupcommit.Result[int], error) {
			return nil, nil
		}, &groupcommit.Config[int]{})
		c.Start()
		t.Cleanup(c.Stop)
		_, err := c.Do(ctx, 1)
		require.ErrorContains(t, err, "0 results for 1 requests")
	})
}

// With a limiter, the flushers take batches only with its permits: at a
// limit of 1, of four idle flushers only one flushes, the requests that
// arrive meanwhile wait as one batch, and a permit taken by someone else
// holds the next batch back until it is given back.
func TestCommitterWithLimiter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := limiter.New(4)
	b := setup(t, &groupcommit.Config[int]{MaxSize: 10, Flushers: 4, Limiter: l}, true)
	answers := make(chan answer, 20)
	b.do(ctx, 0, answers)
	require.Equal(t, []int{0}, <-b.entered)
	require.Equal(t, 1, l.InUse(), "the flush holds the only permit")
	for i := 1; i <= 5; i++ {
		b.do(ctx, i, answers)
	}
	b.waitWaiting(t, 5)
	// Another user of the limiter queues for the permit first.
	other := make(chan error, 1)
	go func() { other <- l.Acquire(ctx) }()
	require.Eventually(t, func() bool { return l.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	b.release <- struct{}{} // the first flush returns
	require.NoError(t, <-other)
	require.Equal(t, 0, (<-answers).value)
	select {
	case got := <-b.entered:
		t.Fatalf("a batch %v was flushed while the permit was taken", got)
	default:
	}
	l.Release()
	require.ElementsMatch(t, []int{1, 2, 3, 4, 5}, <-b.entered, "one batch, for the one permit")
	b.open()
	for range 5 {
		a := <-answers
		require.NoError(t, a.err)
		require.Equal(t, 2*a.item, a.value)
	}
	require.Eventually(t, func() bool { return l.InUse() == 0 }, 10*time.Second, time.Millisecond)
}
