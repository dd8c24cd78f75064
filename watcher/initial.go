package watcher

import (
	"context"
	"maps"
)

// Initial waits until the watcher is Ready (Run has hashed every directory
// that existed at start and watches it), then returns the content hash of
// every directory that was whole then, keyed by the directory as given in
// Options.Dirs: the watcher's own first hashes. A directory missing or
// broken at start is left out; its Change comes when it appears whole.
//
// Each first hash was taken with the directory's watches in place (see
// refresh), so any change that lands after it is sent on Changes: what
// Initial returns and the Changes that follow miss nothing between them. It
// is safe to call from any goroutine; it returns ctx's error if ctx is done
// first.
func (w *Watcher) Initial(ctx context.Context) (map[string][32]byte, error) {
	if !w.Ready() {
		select {
		case <-w.readyc:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.first), nil
}
