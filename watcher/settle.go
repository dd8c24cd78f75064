package watcher

// A volume that looks half-way through an update (kubelet.go) is waited
// for: the kubelet's next step makes an event. One that stays so is not a
// writer at work but a hand-made directory, or a ConfigMap emptied on
// purpose: after settleTimeout it is reported, with a warning.

import (
	"fmt"
	"time"

	"github.com/go-kit/log/level"
)

// settleTimeout bounds how long a volume that looks half-way through an
// update is waited for before what it shows is reported anyway. The
// kubelet's steps follow each other within milliseconds.
const settleTimeout = 2 * time.Second

// settling is a volume's wait for the next step of an update.
type settling struct {
	partialSince time.Time // when the volume was first seen half-way through an update
	settleTimer  *time.Timer
}

// settled reports whether v, half-way through an update (why), has been
// so for longer than the settle bound, and is to be reported as it is.
// Until then the settle timer marks it again.
func (w *Watcher) settled(v *volume, why string) bool {
	now := time.Now()
	if v.partialSince.IsZero() {
		v.partialSince = now
		v.settleTimer = time.AfterFunc(w.settle, func() { w.mark(v) })
		level.Debug(w.logger).Log("msg", "volume is half-way through an update, waiting for the next step", "dir", v.dir, "reason", why)
	}
	if now.Sub(v.partialSince) < w.settle {
		return false
	}
	if why == reasonVanished { // busy, not inconsistent
		level.Debug(w.logger).Log("msg", fmt.Sprintf("volume kept changing for %s, reporting it", w.settle), "dir", v.dir, "reason", why)
	} else {
		w.errorsTotal.Inc()
		level.Warn(w.logger).Log("msg", fmt.Sprintf("volume still looks half-way through an update after %s, reporting what its visible names show", w.settle), "dir", v.dir, "reason", why)
	}
	return true
}

// stopSettle forgets that v was seen half-way through an update.
func (s *settling) stopSettle() {
	s.partialSince = time.Time{}
	if s.settleTimer != nil {
		s.settleTimer.Stop()
		s.settleTimer = nil
	}
}
