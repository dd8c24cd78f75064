package controller

import "time"

// maxDelayFactor bounds how long a change may wait while changes keep
// coming: this many coalescing windows after the first undelivered one, as
// the sidecar's --debounce does.
const maxDelayFactor = 10

// podTiming is what the coalescing of one pod's nudges needs to know.
type podTiming struct {
	// lastPatch is when the pod was last nudged; zero if never.
	lastPatch time.Time
	// pending is when the first change not yet delivered to the pod was
	// seen, lastChange when the latest was; both zero when none is due.
	pending, lastChange time.Time
}

// due says when a pod that is behind may be nudged, given window, the
// --coalesce window. The first change after a quiet window (no nudge in the
// window before it) is sent at once, so that a single edit waits for
// nothing. A change that comes less than a window after the last nudge is
// part of a burst: it waits until no change has come for a window, but
// never more than maxDelayFactor windows after the first change the pod
// has not been sent, so that edits that keep coming are still delivered.
// The last edit of a burst is sent a window after it was made, at most.
func due(t podTiming, window time.Duration, now time.Time) time.Time {
	pending, last := t.pending, t.lastChange
	if pending.IsZero() {
		pending = now
	}
	if window <= 0 || t.lastPatch.IsZero() || pending.Sub(t.lastPatch) >= window {
		return now
	}
	if last.Before(pending) {
		last = pending
	}
	at := last.Add(window)
	if limit := pending.Add(maxDelayFactor * window); limit.Before(at) {
		at = limit
	}
	if at.Before(now) {
		return now
	}
	return at
}
