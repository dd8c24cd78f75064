package e2e

import (
	"testing"
	"time"
)

// PollEvery is how often Eventually and the waits of Proc check their
// condition.
const PollEvery = 5 * time.Millisecond

// Poll calls cond every PollEvery until it returns true or timeout has
// passed, and reports whether it returned true. cond is always called at
// least once, and once more at the deadline.
func Poll(timeout time.Duration, cond func() bool) bool {
	return PollEach(PollEvery, timeout, cond)
}

// PollEach is Poll with its own interval, for conditions that cost more
// than a look at memory, such as a call to the Kubernetes API.
func PollEach(every, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// Eventually fails the test with msg unless cond returns true within
// timeout.
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	if !Poll(timeout, cond) {
		tb.Fatalf("after %s: "+format, append([]any{timeout}, args...)...)
	}
}

// EventuallyMsg is Eventually with a message built at the deadline, so that
// it tells the state then rather than when the wait began.
func EventuallyMsg(tb testing.TB, timeout time.Duration, cond func() bool, msg func() string) {
	tb.Helper()
	if !Poll(timeout, cond) {
		tb.Fatalf("after %s: %s", timeout, msg())
	}
}
