package poll

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Second, func() bool { n++; return n == 3 }) {
		t.Fatal("Until = false, want true once cond holds")
	}
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
}

func TestEachChecksAtTheDeadline(t *testing.T) {
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		calls   int
	}{
		{"no time to wait: once", 0, 1},
		{"an interval longer than the timeout: at once and at the deadline", 20 * time.Millisecond, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			if Each(time.Hour, tt.timeout, func() bool { calls++; return false }) {
				t.Fatal("Each = true for a condition that never holds")
			}
			if calls != tt.calls {
				t.Errorf("cond called %d times, want %d", calls, tt.calls)
			}
		})
	}
}
