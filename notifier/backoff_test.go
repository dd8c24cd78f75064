package notifier

import (
	"math"
	"testing"
	"time"
)

// fixed returns a Rand that always returns f.
func fixed(f float64) func() float64 { return func() float64 { return f } }

func TestBackoffDelay(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		b    Backoff
		n    int
		want time.Duration
	}{
		// With Rand = 0 the delay is the lower bound d/2; with Rand
		// close to 1 it is close to d (never d itself).
		{"first retry low", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0)}, 1, 50 * ms},
		{"first retry high", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0.9)}, 1, 95 * ms},
		{"second doubles", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0)}, 2, 100 * ms},
		{"third doubles again", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0)}, 3, 200 * ms},
		{"middle of the range", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0.5)}, 3, 300 * ms},
		{"capped at Max", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0)}, 5, 500 * ms},
		{"stays capped", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0)}, 1000, 500 * ms},
		{"Max not a power of two times Min", Backoff{Min: 300 * ms, Max: time.Second, Rand: fixed(0)}, 3, 500 * ms},
		{"zero means defaults", Backoff{Rand: fixed(0)}, 1, 100 * ms},
		{"default cap", Backoff{Rand: fixed(0)}, 100, 2500 * ms},
		{"Min above Max is Max", Backoff{Min: 10 * time.Second, Max: time.Second, Rand: fixed(0)}, 1, 500 * ms},
		{"n below 1 is the first retry", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(0)}, 0, 50 * ms},
		{"no overflow near the largest duration", Backoff{Min: time.Hour, Max: math.MaxInt64, Rand: fixed(0)}, 200, math.MaxInt64 / 2},
		{"Rand out of range is clamped", Backoff{Min: 100 * ms, Max: time.Second, Rand: fixed(7)}, 1, 50 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.n); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestBackoffJitterRange(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second} // the real math/rand
	for n := 1; n <= 10; n++ {
		d := min(b.Min<<(n-1), b.Max)
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for range 1000 {
			got := b.Delay(n)
			if got < d/2 || got > d {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", n, got, d/2, d)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		// 1000 draws spread over the range; equal ones would mean no jitter.
		if hi-lo < d/4 {
			t.Errorf("Delay(%d) ranged over [%v, %v] only, want a spread over [%v, %v]", n, lo, hi, d/2, d)
		}
	}
}

func TestBackoffGrows(t *testing.T) {
	b := Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second, Rand: fixed(0.5)}
	prev := time.Duration(0)
	for n := 1; n <= 20; n++ {
		d := b.Delay(n)
		if d < prev {
			t.Fatalf("Delay(%d) = %v, less than Delay(%d) = %v", n, d, n-1, prev)
		}
		if d > b.Max {
			t.Fatalf("Delay(%d) = %v, more than Max %v", n, d, b.Max)
		}
		prev = d
	}
	if prev != 1500*time.Millisecond {
		t.Errorf("Delay(20) = %v, want 1.5s (the middle of [Max/2, Max])", prev)
	}
}

func TestBackoffDefaults(t *testing.T) {
	if got := (Backoff{Rand: fixed(0)}).Delay(1); got != 100*time.Millisecond {
		t.Errorf("Delay(1) of a zero Backoff = %v, want 100ms (half of the 200ms default)", got)
	}
}
