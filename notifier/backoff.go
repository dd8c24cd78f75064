package notifier

import (
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with full jitter on its upper half: the
// delay before retry n (n >= 1) is drawn from [d/2, d], where
// d = min(Max, Min * 2^(n-1)).
type Backoff struct {
	Min time.Duration // first delay; 0 means 200ms
	Max time.Duration // upper bound of any delay; 0 means 5s
	// Rand returns a number in [0, 1); nil means math/rand/v2.
	Rand func() float64
}

// Defaults of Backoff, for a zero Min or Max.
const (
	defaultBackoffMin = 200 * time.Millisecond
	defaultBackoffMax = 5 * time.Second
)

// Delay returns how long to wait before retry n (n >= 1).
func (b Backoff) Delay(n int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = defaultBackoffMin
	}
	if hi <= 0 {
		hi = defaultBackoffMax
	}
	if lo > hi {
		lo = hi
	}
	d := lo
	for i := 1; i < n && d < hi; i++ {
		if d > hi/2 { // also keeps d*2 from overflowing
			d = hi
			break
		}
		d *= 2
	}
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	f := r()
	if f < 0 || f >= 1 { // a Rand out of its contract must not break the bounds
		f = 0
	}
	half := d / 2
	return half + time.Duration(f*float64(d-half))
}
