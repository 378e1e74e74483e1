package main

import (
	"math"
	"math/bits"
	"time"
)

// Bucket layout: values below linearBuckets microseconds get a bucket each;
// above, every power of two is split into subBuckets buckets, so a bucket is
// at most 1/subBuckets (about 3 %) of its value wide.
const (
	linearBuckets = 64
	subBuckets    = 32
	subBits       = 5 // log2(subBuckets)
	numBuckets    = linearBuckets + (64-subBits-1)*subBuckets
)

// Histogram records durations at microsecond resolution in log-linear
// buckets (relative error at most about 3 %), in constant memory. It is not
// safe for concurrent use: give each goroutine its own and Merge them.
type Histogram struct {
	counts   [numBuckets]uint64
	n        uint64
	sum      time.Duration
	min, max time.Duration
}

// bucketOf returns the bucket index of v microseconds.
func bucketOf(v uint64) int {
	if v < linearBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1 // v>>shift has subBits+1 bits
	return linearBuckets + (shift-1)*subBuckets + int(v>>shift) - subBuckets
}

// bucketUpper returns the largest value, in microseconds, bucket i holds.
func bucketUpper(i int) uint64 {
	if i < linearBuckets {
		return uint64(i)
	}
	k := i - linearBuckets
	shift := k/subBuckets + 1
	mantissa := uint64(k%subBuckets + subBuckets)
	return (mantissa+1)<<shift - 1
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	h.counts[bucketOf(uint64(d/time.Microsecond))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// Merge adds o's recordings to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Max returns the largest recording.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean returns the mean recording, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the smallest recorded bucket bound at or below which a
// fraction q (0 < q ≤ 1) of the recordings lie, so it errs high by at most
// one bucket width and never exceeds Max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(bucketUpper(i)) * time.Microsecond
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// Summary is a histogram's figures in milliseconds, for the report.
type Summary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Summary returns the histogram's count, mean, p50, p99, p99.9 and max.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count: h.n, MeanMs: ms(h.Mean()), P50Ms: ms(h.Quantile(0.50)),
		P99Ms: ms(h.Quantile(0.99)), P999Ms: ms(h.Quantile(0.999)), MaxMs: ms(h.max),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
