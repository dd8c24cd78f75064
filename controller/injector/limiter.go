package injector

import (
	"sync"
	"time"
)

// limiter lets one log line of a kind through per interval: a workload
// whose every pod is refused would otherwise log a line per pod.
type limiter struct {
	interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time
}

func newLimiter(interval time.Duration) *limiter {
	return &limiter{interval: interval, last: map[string]time.Time{}}
}

func (l *limiter) allow(kind string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[kind]; ok && now.Sub(t) < l.interval {
		return false
	}
	// Forget the old kinds now and then, so that the map stays small.
	if len(l.last) > 1000 {
		for k, t := range l.last {
			if now.Sub(t) >= l.interval {
				delete(l.last, k)
			}
		}
	}
	l.last[kind] = now
	return true
}
