package e2etest

import (
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/poll"
)

// Eventually fails the test with msg unless cond returns true within
// timeout.
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	if !poll.Until(timeout, cond) {
		tb.Fatalf("after %s: "+format, append([]any{timeout}, args...)...)
	}
}

// EventuallyMsg is Eventually with a message built at the deadline, so that
// it tells the state then rather than when the wait began.
func EventuallyMsg(tb testing.TB, timeout time.Duration, cond func() bool, msg func() string) {
	tb.Helper()
	EventuallyEvery(tb, poll.Interval, timeout, cond, msg)
}

// EventuallyEvery is EventuallyMsg with its own interval, for conditions
// that cost more than a look at memory, such as a call to the Kubernetes
// API.
func EventuallyEvery(tb testing.TB, every, timeout time.Duration, cond func() bool, msg func() string) {
	tb.Helper()
	if !poll.Each(every, timeout, cond) {
		tb.Fatalf("after %s: %s", timeout, msg())
	}
}
