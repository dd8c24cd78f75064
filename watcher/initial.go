package watcher

import (
	"context"
	"time"
)

// initialPoll is how often Initial checks whether the watcher is ready.
const initialPoll = 10 * time.Millisecond

// Initial waits until the watcher is Ready (Run has hashed every directory
// that existed at start and watches it), then returns the content hash of
// every directory that can be hashed now, keyed by the directory as given in
// Options.Dirs. A directory missing now is left out; its Change comes when
// it appears.
//
// The hashes are taken by HashDir after Ready, not copied from the
// watcher's own first hashes (which Run's goroutine owns), so they are never
// older than those: a change that lands after them is sent on Changes, and
// one that lands between the watcher's first hash and them shows in them
// and is also sent on Changes, with the very hash Initial returned (the
// reloader takes such a first Change as "changed while starting"). Content
// that changes and changes back to the watcher's first hash within that
// window (milliseconds at start) is not told apart. It is safe to call from
// any goroutine; it returns ctx's error if ctx is done first.
func (w *Watcher) Initial(ctx context.Context) (map[string][32]byte, error) {
	if !w.Ready() {
		tick := time.NewTicker(initialPoll)
		defer tick.Stop()
		for !w.Ready() {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-tick.C:
			}
		}
	}
	out := make(map[string][32]byte, len(w.dirs))
	for _, d := range w.dirs {
		if sum, err := HashDir(d); err == nil {
			out[d] = sum
		}
	}
	return out, nil
}
