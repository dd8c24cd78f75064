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
// The hashes are taken after Ready, so they are never older than the
// watcher's own first hash: a change that lands before them shows in them,
// and one that lands after them is sent on Changes. It is safe to call from
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
