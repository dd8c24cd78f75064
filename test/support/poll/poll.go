// Package poll waits for a condition by looking at it again and again until
// a deadline, for tests and the demo: nothing that waits for an event
// sleeps a fixed time instead.
package poll

import "time"

// Interval is how often Until looks at its condition.
const Interval = 5 * time.Millisecond

// Until calls cond every Interval until it returns true or timeout has
// passed, and reports whether it returned true. cond is called at once, and
// a last time at the deadline.
func Until(timeout time.Duration, cond func() bool) bool {
	return Each(Interval, timeout, cond)
}

// Each is Until with its own interval, for conditions that cost more than a
// look at memory, such as a call to the Kubernetes API.
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
