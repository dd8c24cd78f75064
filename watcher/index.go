package watcher

import (
	"path/filepath"
	"slices"

	"github.com/fsnotify/fsnotify"
)

// The watch index: which volumes hold an inotify watch on which path, and
// how fsnotify names each watch. inotify watches a directory (an inode), and
// fsnotify names the watch, and the events it reports, by the path the
// watch was first added under, whatever path adds it again. A directory
// renamed keeps its watch, and every directory below it keeps its watch and
// its old name: its events would name paths that no longer exist, and
// removing the old path would remove the watch that the new one relies on.
// The index therefore knows the directory behind each path held, and the
// name of the watch on it, which is always one of the paths held for it:
// the name of an event is translated into every path that holds its
// directory (holdersOf), and a watch whose name is released while another
// path still holds its directory is renamed (release).
//
// Every method here except apply is called with w.mu held.

// dirWatch is the inotify watch on one directory.
type dirWatch struct {
	name  string   // the path fsnotify names the watch by, one of paths
	paths []string // the paths held for the directory
}

// target is a volume and a path in it that an event concerns.
type target struct {
	idx  int
	path string
}

// rename is how a watch changes its name: removed under old and, if new is
// not "", added again under new, for the volumes in mark, which may miss
// events meanwhile.
type rename struct {
	old, new string
	mark     []target
}

// prepare readies p, about to be added for the directory id: if p held
// another directory (a new one took its place) and named its watch,
// fsnotify would turn that watch into the new one's, and the old
// directory's other paths would hear nothing; that watch is renamed first.
func (w *Watcher) prepare(p string, id fileID) rename {
	old, ok := w.dirOf[p]
	if !ok || old == id {
		return rename{}
	}
	return w.detach(p, old)
}

// detach takes p out of the paths held for the directory id, and returns
// how its watch is renamed if p named it.
func (w *Watcher) detach(p string, id fileID) rename {
	delete(w.dirOf, p)
	dw := w.dirWatches[id]
	if dw == nil {
		return rename{}
	}
	dw.paths = slices.DeleteFunc(dw.paths, func(q string) bool { return q == p })
	if dw.name != p {
		return rename{}
	}
	r := rename{old: p}
	if len(dw.paths) == 0 {
		delete(w.dirWatches, id)
		return r
	}
	r.new, dw.name = dw.paths[0], dw.paths[0]
	for i := range w.index[r.new] {
		r.mark = append(r.mark, target{i, r.new})
	}
	return r
}

// hold records that the volume idx holds a watch on p, the directory id,
// just added (under the name p unless the directory was watched already),
// after prepare.
func (w *Watcher) hold(p string, id fileID, idx int) {
	if w.index[p] == nil {
		w.index[p] = make(map[int]bool)
	}
	w.index[p][idx] = true
	if _, ok := w.dirOf[p]; ok {
		return // the same directory: prepare took p out of another's
	}
	w.dirOf[p] = id
	dw := w.dirWatches[id]
	if dw == nil {
		dw = &dirWatch{name: p}
		w.dirWatches[id] = dw
	}
	dw.paths = append(dw.paths, p)
}

// release records that the volume idx no longer holds a watch on p, and
// returns how the watch is removed or renamed (see detach) if no volume
// holds p any more.
func (w *Watcher) release(p string, idx int) rename {
	holders, ok := w.index[p]
	if !ok {
		return rename{}
	}
	delete(holders, idx)
	if len(holders) > 0 {
		return rename{}
	}
	delete(w.index, p)
	id, ok := w.dirOf[p]
	if !ok {
		return rename{}
	}
	return w.detach(p, id)
}

// apply carries out r, without w.mu held.
func (w *Watcher) apply(fsw *fsnotify.Watcher, r rename) {
	if r.old == "" {
		return
	}
	// inotify drops the watch of a deleted directory by itself; then
	// Remove reports that there is none, which is fine.
	_ = fsw.Remove(r.old)
	if r.new == "" {
		return
	}
	_ = w.addWatch(fsw, r.new) // if it fails, the volumes marked find out
	for _, t := range r.mark {
		w.markAt(w.vols[t.idx], t.path)
	}
}

// holdersOf returns the volumes that hold the directory that fsnotify names
// name, each with its own path to it.
func (w *Watcher) holdersOf(name string) []target {
	paths := []string{name}
	if id, ok := w.dirOf[name]; ok && w.dirWatches[id] != nil {
		paths = w.dirWatches[id].paths
	}
	var ts []target
	for _, p := range paths {
		for i := range w.index[p] {
			ts = append(ts, target{i, p})
		}
	}
	return ts
}

// gone drops from the index the directory held at name, which was moved
// or deleted, with every path held for it, and returns the volumes that
// held it, each with its path, and the name of its watch. inotify drops
// the watch of a deleted directory by itself, and fsnotify that of a moved
// one when it reads the move's second event; the caller removes it at
// once, so that a path added for the directory meanwhile gets a watch of
// its own.
func (w *Watcher) gone(name string) (ts []target, watch string) {
	id, ok := w.dirOf[name]
	if !ok {
		return nil, "" // released meanwhile
	}
	ts = w.holdersOf(name)
	dw := w.dirWatches[id] // held: name is one of its paths
	for _, p := range dw.paths {
		delete(w.index, p)
		delete(w.dirOf, p)
	}
	delete(w.dirWatches, id)
	return ts, dw.name
}

// eventTargets returns the volumes that an event on name concerns, each
// with the path in it that the event names: the volumes that hold name
// itself, and those that hold its directory.
func (w *Watcher) eventTargets(name string) []target {
	ts := w.holdersOf(name)
	base := filepath.Base(name)
	for _, t := range w.holdersOf(filepath.Dir(name)) {
		ts = append(ts, target{t.idx, filepath.Join(t.path, base)})
	}
	return ts
}
