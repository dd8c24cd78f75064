package poll

import (
	"fmt"
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

// fakeTB records what Eventually tells a test.
type fakeTB struct{ failed string }

func (*fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	var tb fakeTB
	Eventually(&tb, time.Second, func() bool { return true }, "never %s", "seen")
	if tb.failed != "" {
		t.Fatalf("Eventually failed a condition that holds: %s", tb.failed)
	}
	Eventually(&tb, 0, func() bool { return false }, "never %s", "seen")
	if want := "after 0s: never seen"; tb.failed != want {
		t.Errorf("Eventually failed with %q, want %q", tb.failed, want)
	}
	state := "before"
	EventuallyMsg(&tb, 20*time.Millisecond, func() bool { state = "at the deadline"; return false }, func() string { return state })
	if want := "after 20ms: at the deadline"; tb.failed != want {
		t.Errorf("EventuallyMsg failed with %q, want %q", tb.failed, want)
	}
}
