package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistogram(t *testing.T) {
	t.Parallel()

	t.Run("BucketBoundsAreContiguousAndContainTheirValues", func(t *testing.T) {
		t.Parallel()
		for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 129, 1000, 4095, 4096, 1 << 20, 1<<40 + 12345, 1<<63 - 1} {
			i := bucketOf(v)
			require.Less(t, i, numBuckets, "value %d", v)
			require.LessOrEqual(t, v, bucketUpper(i), "value %d", v)
			if i > 0 {
				require.Greater(t, v, bucketUpper(i-1), "value %d", v)
			}
		}
		for i := 1; i < numBuckets; i++ {
			require.Equal(t, i, bucketOf(bucketUpper(i-1)+1), "bucket %d starts right after %d ends", i, i-1)
		}
	})

	t.Run("EmptyHistogramReportsZero", func(t *testing.T) {
		t.Parallel()
		var h Histogram
		require.Zero(t, h.Quantile(0.99))
		require.Zero(t, h.Mean())
		require.Equal(t, Summary{}, h.Summary())
	})

	t.Run("QuantilesWithinOneBucketOfExact", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewPCG(1, 2))
		var h Histogram
		values := make([]time.Duration, 100_000)
		for i := range values {
			// Log-normal-ish: most around 1 ms, a tail to a second.
			values[i] = time.Duration(float64(time.Millisecond) * rng.ExpFloat64() * rng.ExpFloat64() * 3)
			h.Record(values[i])
		}
		slices.Sort(values)
		for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
			exact := values[int(q*float64(len(values)))-1]
			got := h.Quantile(q)
			require.GreaterOrEqual(t, got, exact.Truncate(time.Microsecond), "q=%v", q)
			require.LessOrEqual(t, float64(got), float64(exact)*1.04+float64(time.Microsecond), "q=%v", q)
		}
		require.Equal(t, values[len(values)-1], h.Max())
	})

	t.Run("MergeEqualsRecordingEverything", func(t *testing.T) {
		t.Parallel()
		var a, b, all Histogram
		for i := range 1000 {
			d := time.Duration(i*i) * time.Microsecond
			all.Record(d)
			if i%2 == 0 {
				a.Record(d)
			} else {
				b.Record(d)
			}
		}
		// Merged both ways, and into an empty one, so that either side may
		// hold the minimum.
		ab, ba, empty := a, b, Histogram{}
		ab.Merge(&b)
		ba.Merge(&a)
		empty.Merge(&all)
		require.Equal(t, all, ab)
		require.Equal(t, all, ba)
		require.Equal(t, all, empty)
	})

	t.Run("SmallCountsUseCeilingRank", func(t *testing.T) {
		t.Parallel()
		var h Histogram
		for _, v := range []int{10, 20, 30, 40} {
			h.Record(time.Duration(v) * time.Microsecond)
		}
		require.Equal(t, 20*time.Microsecond, h.Quantile(0.5))
		require.Equal(t, 40*time.Microsecond, h.Quantile(0.99))
		require.Equal(t, 10*time.Microsecond, h.Quantile(0.01))
	})
}
