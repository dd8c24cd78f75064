package watcher

// What catches what inotify does not report: the resync, the poll ticker,
// and the fallback to polling when inotify is unavailable or out of watches.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log/level"
)

// pollLoop is the resync's and the poll ticker's settings and state.
type pollLoop struct {
	resync  time.Duration
	pollInt time.Duration
	poll    bool          // Options.Poll: never inotify
	wake    chan struct{} // a volume's need of the poll ticker changed
	ticking atomic.Bool   // the poll ticker runs (for tests)
}

func newPollLoop(opts Options) pollLoop {
	pollInt := opts.PollInterval
	if pollInt == 0 {
		pollInt = DefaultPollInterval
	}
	return pollLoop{resync: opts.ResyncInterval, pollInt: pollInt, poll: opts.Poll, wake: make(chan struct{}, 1)}
}

// pollState is a volume's polling.
type pollState struct {
	poll    int  // under w.mu: pollNone, pollStats or pollAlways
	polling bool // polled instead of watched by inotify
	retryAt time.Time
}

// Poll needs of a volume.
const (
	pollNone   = iota
	pollStats  // polled instead of watched: hashed when its stats changed
	pollAlways // missing, broken, half-way through an update, or retrying inotify: hashed at every tick
)

// loop marks volumes for the resync and the poll until ctx is done. The
// poll ticker runs only while some volume needs it, or inotify is to be
// tried again.
func (w *Watcher) loop(ctx context.Context) {
	var resync <-chan time.Time
	if w.resync > 0 {
		t := time.NewTicker(w.resync)
		defer t.Stop()
		resync = t.C
	}
	var ticker *time.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	for {
		w.logLimit()
		switch need := w.needTicker(); {
		case need && ticker == nil:
			ticker = time.NewTicker(w.pollInt)
		case !need && ticker != nil:
			ticker.Stop()
			ticker = nil
		}
		w.ticking.Store(ticker != nil)
		var tick <-chan time.Time
		if ticker != nil {
			tick = ticker.C
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-resync:
			w.check(false)
		case <-tick:
			if w.retryInotify() {
				continue
			}
			w.check(true)
		}
	}
}

// check marks dirty each volume whose stats differ from what its last hash
// saw (see seen), and each that is missing, broken, half-way through an
// update or waiting to retry inotify; on a poll tick only the volumes that
// are polled.
func (w *Watcher) check(pollTick bool) {
	for _, v := range w.vols {
		w.mu.Lock()
		p, s := v.poll, v.seen
		w.mu.Unlock()
		switch {
		case pollTick && p == pollNone:
		case p == pollAlways || !s.unchanged():
			w.mark(v)
		}
	}
}

// needTicker reports whether the poll ticker must run.
func (w *Watcher) needTicker() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	need := !w.poll && w.in == nil
	for _, v := range w.vols {
		need = need || v.poll != pollNone
	}
	return need
}

// updatePoll records whether v needs the poll ticker, and wakes the loop if
// that changed.
func (w *Watcher) updatePoll(v *volume) {
	p := pollNone
	w.mu.Lock()
	switch {
	case !v.present || v.broken != "" || !v.partialSince.IsZero() || (v.polling && w.in != nil):
		p = pollAlways
	case v.polling:
		p = pollStats
	}
	changed := v.poll != p
	v.poll = p
	w.mu.Unlock()
	if changed {
		w.poke()
	}
}

func (w *Watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// inotifyFor returns the inotify instance that is to watch v's next hash,
// or nil if v is polled. A volume polled because a watch failed tries
// inotify again at most once per poll interval.
func (w *Watcher) inotifyFor(v *volume) *inotify {
	w.mu.Lock()
	in := w.in
	w.mu.Unlock()
	switch {
	case in == nil:
		v.polling = true
		return nil
	case v.polling && time.Now().Before(v.retryAt):
		return nil
	case v.polling:
		v.retryAt = time.Now().Add(w.pollInt / 2)
	}
	return in
}

// watched handles the outcome of adding v's watches: err, if not nil, is
// the first failure, and makes v polled (the volumes fall back one by one,
// and the first "watch limit reached" is logged once for all of them by
// logLimit).
func (w *Watcher) watched(v *volume, err error) {
	switch {
	case err == nil && v.polling:
		v.polling = false
		level.Info(w.logger).Log("msg", "watching with inotify again instead of polling", "dir", v.dir)
	case err == nil || v.polling: // a retry that failed again
	case errors.Is(err, syscall.ENOSPC):
		v.polling = true
		w.errorsTotal.Inc()
		w.mu.Lock()
		if w.limitErr == nil {
			w.limitErr = err
		}
		w.mu.Unlock()
		level.Debug(w.logger).Log("msg", fmt.Sprintf("inotify watch limit reached, polling every %s", w.pollInt), "dir", v.dir, "err", err)
	default:
		v.polling = true
		w.errorsTotal.Inc()
		level.Warn(w.logger).Log("msg", fmt.Sprintf("inotify unavailable, polling every %s and trying inotify again as often", w.pollInt), "dir", v.dir, "err", err)
	}
	if v.polling {
		w.hold(v, nil)
		v.retryAt = time.Now().Add(w.pollInt / 2)
	}
}

// logLimit logs, once, that the inotify watch limit was reached, with the
// number of watches the volumes need.
func (w *Watcher) logLimit() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limitErr == nil || w.limitLogged {
		return
	}
	w.limitLogged = true
	need := 0
	for _, v := range w.vols {
		need += v.watchNeed
	}
	level.Warn(w.logger).Log("msg", fmt.Sprintf("inotify watch limit reached: raise the sysctl fs.inotify.max_user_watches (now %s; hotreload needs %d watches for its volumes, on top of other processes of the same user); polling the affected volumes every %s and trying inotify again as often",
		sysctl("fs/inotify/max_user_watches"), need, w.pollInt),
		"needed", strconv.Itoa(need), "err", w.limitErr)
}

// startInotify creates the inotify instance and starts reading its events.
// It reports whether it succeeded. A failure is logged at the first
// attempt only; a later success is logged.
func (w *Watcher) startInotify(first bool) bool {
	in, err := w.newInotify()
	if err != nil {
		if first {
			w.errorsTotal.Inc()
			msg := fmt.Sprintf("inotify unavailable, polling every %s and trying inotify again as often", w.pollInt)
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				msg = fmt.Sprintf("inotify instances exhausted, raise the sysctl fs.inotify.max_user_instances (now %s; each hotreload needs 1); polling every %s and trying inotify again as often",
					sysctl("fs/inotify/max_user_instances"), w.pollInt)
			}
			level.Warn(w.logger).Log("msg", msg, "err", err)
		}
		return false
	}
	w.mu.Lock()
	w.in = in
	w.mu.Unlock()
	if !first {
		level.Info(w.logger).Log("msg", "inotify available again, watching with inotify instead of polling")
	}
	w.readers.Add(1)
	go func() {
		defer w.readers.Done()
		buf := make([]byte, 4096)
		for in.read(buf, w.event) == nil {
		}
	}()
	return true
}

// retryInotify tries to start inotify if it is wanted and not running, and
// reports whether it did; every volume is then hashed, adding its watches.
func (w *Watcher) retryInotify() bool {
	w.mu.Lock()
	want := !w.poll && w.in == nil
	w.mu.Unlock()
	if !want || !w.startInotify(false) {
		return false
	}
	for _, v := range w.vols {
		w.mark(v)
	}
	return true
}

// sysctl reads a value under /proc/sys, or "unknown".
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
