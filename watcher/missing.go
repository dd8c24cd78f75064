package watcher

// A volume that is not there: waited for, its nearest existing parent
// watched, and, for a directory of Options.Dirs, a problem once the grace
// period is over.

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-kit/log/level"
)

// missingGrace is how long a directory of Options.Dirs may be missing
// before it is a problem: a warning, the metric, and Ready's error.
// missingRepeat paces the warning while it stays missing.
const (
	missingGrace  = 30 * time.Second
	missingRepeat = 10 * time.Minute
)

// subPathHint is what to do about a directory to watch that is a file. The
// likely cause is a ConfigMap key mounted with subPath, which the kubelet
// never updates: watching the directory that holds it would give a Ready pod
// that never reloads (seen in a real pod), so the hint says what works.
const subPathHint = "a subPath mount never updates: mount the whole volume into hotreload's container (no subPath) and give its mount path"

// missingTimes are the grace period and the pace of the warning; tests
// shorten them.
type missingTimes struct{ grace, repeat time.Duration }

// missingState is a volume's wait for its root.
type missingState struct {
	missing      string // under w.mu: why Ready fails: missing beyond the grace period
	waiting      bool   // the "waiting for it" line was logged
	rootErr      string // the last root error logged
	missingSince time.Time
	missingTimer *time.Timer
	nextWarn     time.Time // of the missing volume's warning; zero before the first
}

func (m *missingState) stopMissing() {
	if m.missingTimer != nil {
		m.missingTimer.Stop()
	}
}

// Ready returns nil once every directory that existed when Run started has
// been hashed and is watched, by inotify or by polling, unless a directory
// of Options.Dirs has been missing for longer than the grace period; else
// an error saying why not.
func (w *Watcher) Ready() error {
	select {
	case <-w.readyc:
	default:
		return errors.New("a volume is not watched yet")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.vols {
		if v.missing != "" {
			return errors.New(v.missing)
		}
	}
	return nil
}

// found records that v exists, after it was missing.
func (w *Watcher) found(v *volume) {
	v.rootErr = ""
	if !v.present {
		v.present = true
		w.watchedDirs.Inc()
		if v.waiting {
			v.waiting = false
			level.Info(w.logger).Log("msg", "volume found, watching it", "dir", v.dir)
		}
	}
	if v.missingTimer != nil {
		v.missingTimer.Stop()
		v.missingTimer = nil
	}
	v.missingSince = time.Time{}
	if !v.nextWarn.IsZero() {
		v.nextWarn = time.Time{}
		w.missingDirs.DeleteLabelValues(v.dir)
		w.mu.Lock()
		v.missing = ""
		w.mu.Unlock()
	}
}

// lost handles a volume whose root cannot be hashed: it no longer exists,
// is not a directory, or cannot be read. The volume is waited for (polled,
// and its nearest existing parent watched); its last reported hash is
// kept, so that a re-creation with identical content is not a change.
func (w *Watcher) lost(v *volume, err error, initial bool) {
	v.stopSettle()
	if v.present {
		v.present = false
		w.watchedDirs.Dec()
	}
	w.logLost(v, err, initial)
	w.missing(v, err)

	// Watch the nearest existing parent: the volume's creation is an
	// event there.
	in := w.inotifyFor(v)
	if in == nil {
		return
	}
	var ws watchSet
	if parent := existingParent(v.path); parent != "" {
		w.watchDir(in, v, &ws, parent)
	}
	w.mu.Lock()
	added := !maps.Equal(ws.wds, v.wds)
	w.mu.Unlock()
	w.hold(v, ws.wds)
	w.watched(v, ws.err)
	if info, err := os.Stat(v.path); added && err == nil && info.IsDir() {
		w.mark(v) // it appeared before the parent's watch existed
	}
}

// logLost logs why v cannot be hashed, once per kind of error.
func (w *Watcher) logLost(v *volume, err error, initial bool) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !v.waiting {
			v.waiting = true
			msg := "volume does not exist yet, waiting for it"
			if !initial {
				msg = "volume removed, waiting for it"
			}
			level.Info(w.logger).Log("msg", msg, "dir", v.dir, "poll_interval", w.pollInt)
		}
	case v.rootErr == err.Error():
	case errors.Is(err, errNotDir) || errors.Is(err, syscall.ENOTDIR):
		v.rootErr, v.waiting = err.Error(), true
		w.errorsTotal.Inc()
		level.Warn(w.logger).Log("msg", "volume is a file, not a directory, waiting for a directory: "+subPathHint, "dir", v.dir)
	default:
		v.rootErr, v.waiting = err.Error(), true
		w.errorsTotal.Inc()
		level.Warn(w.logger).Log("msg", fmt.Sprintf("cannot read volume, retrying every %s", w.pollInt), "dir", v.dir, "err", err)
	}
}

// existingParent returns the real path of the nearest directory above
// path that exists, or "".
func existingParent(path string) string {
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if info, err := os.Stat(real); err == nil && info.IsDir() {
				return real
			}
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// missing makes a volume of Options.Dirs that stays missing beyond the
// grace period a problem: a warning (repeated every missingRepeat, at the
// poll tick that follows), the metric, and Ready's error.
func (w *Watcher) missing(v *volume, err error) {
	now := time.Now()
	if v.missingSince.IsZero() {
		v.missingSince = now
		if !v.optional {
			v.missingTimer = time.AfterFunc(w.grace, func() { w.mark(v) })
		}
	}
	if v.optional || now.Sub(v.missingSince) < w.grace || now.Before(v.nextWarn) {
		return
	}
	v.nextWarn = now.Add(w.repeat)
	w.missingDirs.WithLabelValues(v.dir).Set(1)
	w.mu.Lock()
	v.missing = fmt.Sprintf("volume %s missing for %s: %v", v.dir, now.Sub(v.missingSince).Round(100*time.Millisecond), errors.Unwrap(err))
	w.mu.Unlock()
	level.Warn(w.logger).Log("msg", fmt.Sprintf("volume missing for %s, not ready until it appears; if its path is wrong, give the path the container mounts it at; if it may be absent, declare it optional", now.Sub(v.missingSince).Round(100*time.Millisecond)),
		"dir", v.dir, "err", err)
}
