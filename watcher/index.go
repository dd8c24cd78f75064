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
// A second path to a watched directory (another volume reaching it through
// a symlink) adds no watch either. The index therefore knows the directory
// behind each path and the name of the watch on it: a path whose directory
// is watched under another name is watched afresh (see hold), and the name
// of an event is translated back into every path that holds the directory
// (see resolve).
//
// Every method here is called with w.mu held.

// target is a volume and a path in it that an event concerns.
type target struct {
	idx  int
	path string
}

// staleName returns the name under which fsnotify watches the directory id
// if no path holds it any more (the directory was renamed), and forgets it:
// the caller removes that watch before it adds p, so that the watch and its
// events are named p. While another path holds it, the watch keeps its name
// and events are translated.
func (w *Watcher) staleName(p string, id fileID) string {
	name, ok := w.names[id]
	if !ok || name == p || w.dirPaths[id][name] {
		return ""
	}
	delete(w.names, id)
	delete(w.byName, name)
	return name
}

// hold records that the volume idx holds a watch on p, the directory id,
// just added (under the name p unless the directory was watched already).
func (w *Watcher) hold(p string, id fileID, idx int) {
	if old, ok := w.ids[p]; ok && old != id {
		// A new directory at p: the old one is no longer reached by p.
		w.forgetPath(p)
	}
	if other, ok := w.byName[p]; ok && other != id {
		delete(w.names, other)
		delete(w.byName, p)
	}
	if w.index[p] == nil {
		w.index[p] = make(map[int]bool)
	}
	w.index[p][idx] = true
	w.ids[p] = id
	if w.dirPaths[id] == nil {
		w.dirPaths[id] = make(map[string]bool)
	}
	w.dirPaths[id][p] = true
	if _, ok := w.names[id]; !ok {
		w.names[id] = p
		w.byName[p] = id
	}
}

// rename is how a watch changes its name: removed under old and added
// again under new, for the volumes in mark, which may miss events meanwhile.
type rename struct {
	old, new string
	mark     []target
}

// release records that the volume idx no longer holds a watch on p. If no
// path holds the directory any more, the watch is to be removed (r.old);
// if p named the watch and another path still holds the directory, the
// watch is to be named after that path (r.new).
func (w *Watcher) release(p string, idx int) (r rename) {
	holders, ok := w.index[p]
	if !ok {
		return rename{}
	}
	delete(holders, idx)
	if len(holders) > 0 {
		return rename{}
	}
	id := w.ids[p]
	w.forgetPath(p)
	name, ok := w.names[id]
	if !ok || (name != p && w.dirPaths[id][name]) {
		return rename{}
	}
	delete(w.names, id)
	delete(w.byName, name)
	r.old = name
	for q := range w.dirPaths[id] {
		r.new = q
		w.names[id] = q
		w.byName[q] = id
		for i := range w.index[q] {
			r.mark = append(r.mark, target{i, q})
		}
		break
	}
	return r
}

// apply carries out r.
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

// forgetPath drops p from the index, for every volume.
func (w *Watcher) forgetPath(p string) {
	delete(w.index, p)
	id, ok := w.ids[p]
	if !ok {
		return
	}
	delete(w.ids, p)
	delete(w.dirPaths[id], p)
	if len(w.dirPaths[id]) == 0 {
		delete(w.dirPaths, id)
	}
}

// resolve returns the paths held for the directory that fsnotify names
// name, or name itself if no watch has that name.
func (w *Watcher) resolve(name string) []string {
	id, ok := w.byName[name]
	if !ok {
		return []string{name}
	}
	return slices.Collect(func(yield func(string) bool) {
		for p := range w.dirPaths[id] {
			if !yield(p) {
				return
			}
		}
	})
}

// holdersOf returns the volumes that hold the directory fsnotify names
// name, each with its own path to it.
func (w *Watcher) holdersOf(name string) []target {
	var ts []target
	for _, p := range w.resolve(name) {
		for i := range w.index[p] {
			ts = append(ts, target{i, p})
		}
	}
	return ts
}

// gone drops from the index the watch that fsnotify names name, whose
// directory was moved or deleted, and returns the volumes that held it,
// each with its path, and whether a watch had that name. inotify drops the
// watch of a deleted directory by itself, and fsnotify that of a moved one
// when it reads the move's second event; the caller removes it at once, so
// that a path added for the directory meanwhile gets a watch of its own.
func (w *Watcher) gone(name string) (ts []target, known bool) {
	ts = w.holdersOf(name)
	for _, p := range w.resolve(name) {
		w.forgetPath(p)
	}
	id, known := w.byName[name]
	if known {
		delete(w.names, id)
		delete(w.byName, name)
	}
	return ts, known
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
