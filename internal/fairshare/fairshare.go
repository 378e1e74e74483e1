// Package fairshare shares a bounded budget of slots (the receiver's
// in-flight deliveries, its group commit's queue) among keys (sources), so
// that one key at full rate cannot take the slots another one needs.
//
// The rule: a key may hold at most Share of the slots the other keys leave
// (size minus what the others hold), rounded down, and at least one. A key
// alone may so hold Share of the budget; a second key finds the rest free
// and may take Share of it; and so on: while fewer than about log2(size)
// keys are at their cap at once, a slot is always left for a newcomer.
// Share 1 turns the rule off: a key may take any free slot.
package fairshare

import (
	"errors"
	"math"
	"sync"
)

// ShareDefault is the share a key gets when none is given: half of what
// the other keys leave.
const ShareDefault = 0.5

var (
	// ErrFull is Acquire's error when every slot is taken.
	ErrFull = errors.New("fairshare: every slot is taken")
	// ErrShare is Acquire's error when the key holds its share of the
	// slots the other keys leave, though some are free.
	ErrShare = errors.New("fairshare: the key holds its share of the slots")
)

// Budget is a number of slots shared among keys. It is safe for
// concurrent use.
type Budget struct {
	size  int
	share float64
	mu    sync.Mutex
	held  map[string]int
	total int
}

// New returns a Budget of size slots where a key may hold share (more than
// 0, at most 1; ShareDefault when 0) of the slots the others leave.
func New(size int, share float64) *Budget {
	if share <= 0 || share > 1 {
		share = ShareDefault
	}
	return &Budget{size: size, share: share, held: map[string]int{}}
}

// Acquire takes a slot for key, or returns ErrFull or ErrShare. A slot
// taken must be given back with Release.
func (b *Budget) Acquire(key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total >= b.size {
		return ErrFull
	}
	n := b.held[key]
	if n >= b.limit(b.total-n) {
		return ErrShare
	}
	b.held[key] = n + 1
	b.total++
	return nil
}

// Release gives back a slot key took.
func (b *Budget) Release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[key] <= 1 {
		delete(b.held, key)
	} else {
		b.held[key]--
	}
	b.total--
}

// Held returns the slots taken, by every key.
func (b *Budget) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Limit returns the most slots key may hold now, given what the other keys
// hold.
func (b *Budget) Limit(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit(b.total - b.held[key])
}

// limit is the most slots a key may hold while the others hold others.
// The epsilon keeps a product such as 0.29 × 100 from rounding down to 28.
func (b *Budget) limit(others int) int {
	return max(1, int(math.Floor(b.share*float64(b.size-others)+1e-9)))
}
