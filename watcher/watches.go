package watcher

// The inotify watches: which volumes hold which directory, by watch
// descriptor.

import (
	"errors"
	"io/fs"
	"slices"
	"syscall"
)

// watch is one inotify watch: a directory, and the volumes whose last hash
// walked it.
type watch struct {
	dir  string // the real path it was last added under
	vols []*volume
}

// watchSet collects the inotify watches of one hash.
type watchSet struct {
	wds map[int]bool
	err error // the first failure other than a directory that vanished
}

// watchDir adds the inotify watch on the real directory dir for v.
func (w *Watcher) watchDir(in *inotify, v *volume, ws *watchSet, dir string) {
	if ws.err != nil {
		return // the volume is polled instead
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, err := w.addWatch(in, dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			ws.err = err
		} // else vanished: the walk finds out
		return
	}
	if ws.wds == nil {
		ws.wds = make(map[int]bool)
	}
	ws.wds[wd] = true
	wt := w.watches[wd]
	if wt == nil {
		wt = &watch{}
		w.watches[wd] = wt
	}
	wt.dir = dir
	if !slices.Contains(wt.vols, v) {
		wt.vols = append(wt.vols, v)
	}
}

// hold makes v hold the watches wds, and drops those it held before and no
// longer needs, with the inotify watch if no volume holds it any more.
func (w *Watcher) hold(v *volume, wds map[int]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd := range v.wds {
		wt := w.watches[wd]
		if wds[wd] || wt == nil {
			continue
		}
		wt.vols = slices.DeleteFunc(wt.vols, func(u *volume) bool { return u == v })
		if len(wt.vols) == 0 {
			delete(w.watches, wd)
			w.in.remove(wd)
		}
	}
	v.wds = wds
}
