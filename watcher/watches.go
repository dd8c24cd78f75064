package watcher

// The inotify watches: which volumes hold which directory, by watch
// descriptor.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// inotifyState is the watcher's inotify instance and its watches.
type inotifyState struct {
	newInotify func() (*inotify, error)                   // tests replace it
	addWatch   func(in *inotify, dir string) (int, error) // tests replace it
	readers    sync.WaitGroup                             // the inotify event readers

	// Under w.mu.
	in          *inotify       // nil while inotify is not used
	watches     map[int]*watch // by watch descriptor
	limitErr    error          // the first "watch limit reached" error
	limitLogged bool
}

func newInotifyState() inotifyState {
	return inotifyState{
		newInotify: newInotify,
		addWatch:   func(in *inotify, dir string) (int, error) { return in.add(dir) },
		watches:    make(map[int]*watch),
	}
}

// watchState is what a volume holds of the watches; under w.mu.
type watchState struct {
	wds       map[int]bool
	watchNeed int // directories the last hash wanted watched
}

// stopInotify closes the inotify instance and waits for its reader.
func (w *Watcher) stopInotify() {
	if w.in != nil {
		w.in.close()
	}
	w.readers.Wait()
}

// shows reports whether an entry named name in the directory dir is part
// of what an app sees, and an event that names it is to mark a volume.
// Names starting with ".." are hidden from the hash; of them only ..data,
// and the version directory it names, change what the visible names show.
// The kubelet's other steps (the next version directory made and
// chmod'ed, ..data_tmp, the old version deleted) would each cost a walk:
// BenchmarkChangeCPU's kubelet/files=N in test/cost prints the walks per
// change.
func shows(dir, name string) bool {
	if !hidden(name) || name == dataLink {
		return true
	}
	target, _ := os.Readlink(filepath.Join(dir, dataLink))
	return name == target
}

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

// watchFunc returns the function that adds v's watches on in to ws, or nil
// if in is nil.
func (w *Watcher) watchFunc(in *inotify, v *volume, ws *watchSet) func(string) {
	if in == nil {
		return nil
	}
	return func(dir string) { w.watchDir(in, v, ws, dir) }
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
