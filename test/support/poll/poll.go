// Package poll is the one way the tests, the benchmarks and the demo wait for
// an event: they look at a condition again and again until a deadline,
// never sleep a fixed time instead. Until and Each report whether the
// condition came true; Eventually and its variants fail a test when it did
// not. The package imports no testing package, so the demo can link it.
package poll

import "time"

// Interval is how often Until and Eventually look at their condition.
const Interval = 5 * time.Millisecond

// Until calls cond every Interval until it returns true or timeout has
// passed, and reports whether it returned true. cond is called at once, and
// a last time at the deadline.
func Until(timeout time.Duration, cond func() bool) bool {
	return Each(Interval, timeout, cond)
}

// Each is Until with its own interval, for conditions that cost more than a
// look at memory, such as a call to the Kubernetes API, or that wait in a
// synctest bubble's virtual time.
func Each(every, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		last := !time.Now().Before(deadline)
		if cond() {
			return true
		}
		if last {
			return false
		}
		time.Sleep(min(every, time.Until(deadline)))
	}
}

// TB is the part of testing.TB that Eventually needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Eventually fails tb with the formatted message, after the timeout, unless
// cond returns true within timeout.
func Eventually(tb TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	if !Until(timeout, cond) {
		tb.Fatalf("after %s: "+format, append([]any{timeout}, args...)...)
	}
}

// EventuallyMsg is Eventually with a message built at the deadline, so that
// it tells the state then rather than when the wait began.
func EventuallyMsg(tb TB, timeout time.Duration, cond func() bool, msg func() string) {
	tb.Helper()
	EventuallyEvery(tb, Interval, timeout, cond, msg)
}

// EventuallyEvery is EventuallyMsg with its own interval (see Each).
func EventuallyEvery(tb TB, every, timeout time.Duration, cond func() bool, msg func() string) {
	tb.Helper()
	if !Each(every, timeout, cond) {
		tb.Fatalf("after %s: %s", timeout, msg())
	}
}
