package watcher

// A fast path for plain directories: an event names the directory it
// happened in, and a plain tree is hashed again by listing only the
// directories that events named, reading what changed in them and folding
// the digests of the rest from memory, instead of walking every file: work
// over the changed directories, not over all files. Its benchmarks:
// BenchmarkTreeUpdate here, and BenchmarkChangeCPU's plain/files=10000 in
// test/cost beside plain-with-symlink/files=10000 (a walk). The watcher
// reaches it through plainPath alone.

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxDirtyDirs bounds the directories that events named which a volume
// keeps between two hashes; past it, the volume is walked.
const maxDirtyDirs = 1024

// plainPath is a volume's state for the fast path.
type plainPath struct {
	// Under w.mu.
	dirs    map[string]bool // the directories events named since the last hash took them
	walkAll bool            // a mark named no directory: the next hash walks the volume

	// The hashing goroutine's.
	tree *plainTree // the last hash's, if the volume is a plain tree
}

// mark records that the entries of the real directory dir changed; ""
// says that anything may have changed: the volume is walked.
func (p *plainPath) mark(dir string) {
	switch {
	case p.walkAll:
	case dir == "" || len(p.dirs) >= maxDirtyDirs:
		p.walkAll, p.dirs = true, nil
	default:
		if p.dirs == nil {
			p.dirs = make(map[string]bool)
		}
		p.dirs[dir] = true
	}
}

// take returns the directories marked since the last take (nil: walk the
// volume), and forgets them.
func (p *plainPath) take() (dirty []string) {
	if !p.walkAll {
		dirty = slices.Collect(maps.Keys(p.dirs))
	}
	p.walkAll, p.dirs = false, nil
	return dirty
}

// keep keeps the plain tree of the hash just made (nil if it was not one);
// a polled volume keeps none, as no event names what changes in it.
func (p *plainPath) keep(t *plainTree, polled bool) {
	p.tree = t
	if polled {
		p.tree = nil
	}
}

// updatePlain hashes v again from the directories dirty, if v is a plain
// tree watched by inotify in, adding the watches of the directories listed
// to ws; it reports false if v is to be walked.
func (w *Watcher) updatePlain(v *volume, in *inotify, dirty []string, ws *watchSet) (hashResult, bool) {
	if v.plain.tree == nil || dirty == nil || in == nil || v.polling {
		return hashResult{}, false
	}
	res, ok := w.hasher.update(v.plain.tree, v.seen, dirty, w.watchFunc(in, v, ws))
	if ok { // the directories not listed again keep their watches
		w.mu.Lock()
		ws.wds = mapsUnion(ws.wds, v.wds)
		w.mu.Unlock()
	}
	return res, ok
}

// mapsUnion returns a map holding the keys of a and b.
func mapsUnion(a, b map[int]bool) map[int]bool {
	u := make(map[int]bool, len(a)+len(b))
	maps.Copy(u, a)
	maps.Copy(u, b)
	return u
}

// plainTree is what a whole hash of a plain tree saw: a root without
// ..data whose walk followed no symlink and met no problem but unreadable
// files. inotify names
// every change in such a tree: its directories are all watched, and an entry
// created, written, removed, renamed or chmod'ed makes an event in the
// directory that holds it. (A symlink can show something else without an
// event in the tree; such volumes are walked.)
type plainTree struct {
	root       string            // real path
	entries    []entry           // every file, sorted by visible path
	dirs       map[string]string // every directory, real path -> visible path ("." for the root)
	problems   []problem         // the unreadable files
	unreadable map[string]fileMeta
}

// tree returns the plainTree of the walk of root that gave res with
// entries, or nil if it was not a whole hash of a plain tree.
func (w *walk) tree(root string, entries []entry, res hashResult) *plainTree {
	if res.version != "" || res.partial != "" || res.broken != "" || !w.plain(entries) {
		return nil
	}
	return &plainTree{root: root, entries: entries, dirs: w.dirs, problems: w.problems, unreadable: res.unreadable}
}

// plain reports whether what w walked, with entries, can be a plain tree:
// no symlink followed, nothing vanished, no problem but unreadable files.
func (w *walk) plain(entries []entry) bool {
	return !w.links && !w.vanished &&
		!slices.ContainsFunc(entries, func(e entry) bool { return e.kind != kindFile && e.kind != kindMeta }) &&
		!slices.ContainsFunc(w.problems, func(p problem) bool { return !errors.Is(p.err, fs.ErrPermission) })
}

// update hashes the plain tree t again, listing only the directories dirty
// (real paths, as events named them) and walking the directories that are
// new in them. It reports false if the volume is to be walked: a directory
// it does not know, one that vanished, a directory gone from a listing, a
// symlink or ..data, a problem, or an entry that vanished while it was read.
// A directory moved or removed makes the watcher walk the volume without
// calling update (see event), so no visible path that t holds is stale.
func (h hasher) update(t *plainTree, last *seen, dirty []string, watch func(string)) (hashResult, bool) {
	w := h.newWalk(last, watch, 0)
	listed := make(map[string]bool, len(dirty)) // visible paths of the directories listed again
	for _, dir := range dirty {
		rel, ok := t.dirs[dir]
		if !ok || !w.relist(t, dir, rel) {
			return hashResult{}, false
		}
		listed[rel] = true
	}
	fresh, unreadable := w.read()
	if !w.plain(fresh) {
		return hashResult{}, false
	}
	// What the directories listed again hold comes from fresh alone;
	// both are sorted by visible path, and so is their merge.
	stale := func(rel string) bool { return listed[parent(rel)] }
	entries := make([]entry, 0, len(t.entries)+len(fresh))
	for _, e := range t.entries {
		if stale(e.rel) {
			continue
		}
		for len(fresh) > 0 && fresh[0].rel < e.rel {
			entries, fresh = append(entries, fresh[0]), fresh[1:]
		}
		entries = append(entries, e)
	}
	entries = append(entries, fresh...)
	problems := slices.DeleteFunc(slices.Clone(t.problems), func(p problem) bool { return stale(p.path) })
	problems = append(problems, w.problems...)
	for rel, m := range t.unreadable {
		if !stale(rel) {
			if unreadable == nil {
				unreadable = make(map[string]fileMeta)
			}
			unreadable[rel] = m
		}
	}

	dirs := make(map[string]string, len(t.dirs)+len(w.dirs))
	for _, m := range []map[string]string{t.dirs, w.dirs} {
		for d, rel := range m {
			dirs[d] = rel
		}
	}
	// The digests of the files not read again stay in last's map, which
	// belongs to the volume's goroutine; the stamps of the directories not
	// listed are not at hand: the next resync walks the volume.
	files := w.next.files
	if last != nil {
		for k, e := range files {
			last.files[k] = e
		}
		files = last.files
	}
	res := hashResult{watched: len(dirs), seen: &seen{files: files}, problems: problems, unreadable: unreadable}
	res.sum, res.versionSum = fold(entries)
	res.tree = &plainTree{root: t.root, entries: entries, dirs: dirs, problems: problems, unreadable: unreadable}
	return res, true
}

// relist lists the known directory dir (visible path rel) again and visits
// its entries but the directories it knows, which keep what the tree holds
// of them. It reports false if dir vanished, a directory it knew in dir is
// gone, or ..data appeared in the root.
func (w *walk) relist(t *plainTree, dir, rel string) bool {
	w.watchDir(dir)
	des, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	present := make(map[string]bool) // the known directories still here
	for _, de := range des {
		name := de.Name()
		if hidden(name) {
			if rel == "." && name == dataLink {
				return false // now a kubelet volume
			}
			continue
		}
		p := filepath.Join(dir, name)
		if _, known := t.dirs[p]; known && de.IsDir() {
			present[p] = true
			continue
		}
		child := name
		if rel != "." {
			child = rel + "/" + name
		}
		w.visit(child, p) // a file, or a new directory walked whole
	}
	for d := range t.dirs {
		if filepath.Dir(d) == dir && d != dir && !present[d] {
			return false // moved or removed: its event comes, the walk reads it
		}
	}
	return true
}

// parent returns the visible path of the directory that holds rel.
func parent(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}
