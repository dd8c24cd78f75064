package watcher

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// plainTree is what the last complete hash of a plain tree read: a volume
// root without ..data whose walk followed no symlink and found no file with
// another hard link. In such a tree inotify names every change of what an
// app sees: every directory of it is watched, and an entry created, written,
// removed, renamed or chmod'ed in a watched directory comes with its name.
// An event then costs reading what it names and a fold of the digests
// remembered here, not a walk that stats every file. A symlink can show
// something else without an event in the tree (its target changes), and so
// can a file written through another hard link: such volumes are walked.
type plainTree struct {
	root       string              // real path of the root
	sum        [32]byte            // the hash of entries
	entries    []entry             // sorted by visible path
	dirs       map[string]fileID   // real paths of the directories to watch
	problems   []problem           // as the walk found them
	unreadable map[string]fileMeta // by visible path
}

// tree returns the plainTree of this walk of a root without ..data, whose
// entries are sorted, or nil if res is no complete hash of a plain tree.
func (w *walk) tree(sorted []entry, res *hashResult) *plainTree {
	// A directory reached twice without a symlink (aliased) is a bind mount.
	if runtime.GOOS != "linux" || res.version != "" || res.partial != "" || res.broken != "" || w.links || w.shared || w.aliased || w.vanished {
		return nil
	}
	return &plainTree{root: res.root, sum: res.sum, entries: sorted, dirs: w.dirs, problems: w.problems, unreadable: res.unreadable}
}

// update returns the hash of the plain tree t as it is now, reading only
// what paths (real paths named by inotify events since t was read) show
// now, with the plainTree of the result in res.tree. ok is false if the
// volume must be walked instead: a path is the root or outside it, names a
// hidden entry of the root (..data: the root may have become a kubelet
// volume), or leads to a symlink, a hard-linked file, a directory reached
// twice or an entry that cannot be looked up; or the update caught a change
// in the middle (an entry vanished while it was read, a directory is seen
// at its old and its new path). A walk reads the volume whole and judges
// such a moment with the watches in place, as for any other volume.
func (h hasher) update(t *plainTree, paths []string) (res hashResult, ok bool) {
	start := time.Now()
	rels, top, ok := t.rels(paths)
	if !ok {
		return hashResult{}, false
	}
	if len(rels) == 0 {
		return hashResult{sum: t.sum, versionSum: emptyHash, dirs: t.dirs, problems: t.problems, unreadable: t.unreadable, root: t.root, tree: t}, true
	}

	w := newWalk(t.root, t.dirs[t.root])
	ancestors := make(map[string]lookup)
	for _, rel := range rels {
		p := filepath.Join(t.root, filepath.FromSlash(rel))
		info, found := lookupIn(t.root, rel, ancestors)
		switch {
		case found == lookupGone:
			continue
		case found == lookupOther || info.Mode()&fs.ModeSymlink != 0:
			return hashResult{}, false
		}
		w.visitInfo(rel, p, info)
	}
	if w.links || w.shared || w.aliased {
		return hashResult{}, false
	}
	fresh, unreadable := h.entries(w, "", nil, start)
	if w.vanished {
		return hashResult{}, false
	}
	res = hashResult{root: t.root}

	covered := func(rel string) bool { return under(top, rel) }
	next := &plainTree{root: t.root}
	next.entries = mergeEntries(t.entries, rels, fresh)
	next.sum, res.versionSum = fold(next.entries)
	next.dirs = make(map[string]fileID, len(t.dirs)+len(w.dirs))
	for d, id := range t.dirs {
		if rel, ok := t.rel(d); !ok || !covered(rel) {
			next.dirs[d] = id
		}
	}
	maps.Copy(next.dirs, w.dirs)
	ids := make(map[fileID]bool, len(next.dirs))
	for _, id := range next.dirs {
		if ids[id] {
			// A directory at two paths: it moved, and the event of the
			// path it left is still on its way.
			return hashResult{}, false
		}
		ids[id] = true
	}
	for _, p := range t.problems {
		if !covered(p.path) {
			next.problems = append(next.problems, p)
		}
	}
	next.problems = append(next.problems, w.problems...)
	next.unreadable = unreadable // all inside rels
	for rel, m := range t.unreadable {
		if !covered(rel) {
			if next.unreadable == nil {
				next.unreadable = make(map[string]fileMeta)
			}
			next.unreadable[rel] = m
		}
	}
	res.sum, res.dirs, res.problems, res.unreadable, res.tree = next.sum, next.dirs, next.problems, next.unreadable, next
	return res, true
}

// rels returns the visible paths, relative to the root, that paths name, in
// order and without one inside another, and the same as a set; ok is false
// if the volume must be walked instead (see update).
func (t *plainTree) rels(paths []string) (rels []string, top map[string]bool, ok bool) {
	for _, p := range paths {
		rel, in := t.rel(p)
		if !in {
			return nil, nil, false
		}
		parts := strings.Split(rel, "/")
		if hidden(parts[0]) {
			return nil, nil, false
		}
		if slices.ContainsFunc(parts, hidden) {
			continue // below the root, hidden entries are never read
		}
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	rels = slices.Compact(rels)
	top = make(map[string]bool, len(rels))
	return slices.DeleteFunc(rels, func(rel string) bool {
		// An ancestor sorts before what it holds.
		if under(top, rel) {
			return true
		}
		top[rel] = true
		return false
	}), top, true
}

// rel returns the visible path of the real path p inside the root, or
// false if p is the root or outside it.
func (t *plainTree) rel(p string) (string, bool) {
	rel, in := strings.CutPrefix(p, t.root+string(filepath.Separator))
	return filepath.ToSlash(rel), in && rel != ""
}

// under reports whether the visible path rel is in set or inside a path
// that is.
func under(set map[string]bool, rel string) bool {
	for {
		if set[rel] {
			return true
		}
		i := strings.LastIndexByte(rel, '/')
		if i < 0 {
			return false
		}
		rel = rel[:i]
	}
}

// mergeEntries returns old (sorted) without the entries at or inside rels
// (sorted, none inside another), merged with fresh (sorted, all at or inside
// rels).
func mergeEntries(old []entry, rels []string, fresh []entry) []entry {
	type span struct{ lo, hi int }
	find := func(rel string) int {
		return sort.Search(len(old), func(i int) bool { return old[i].rel >= rel })
	}
	var spans []span
	for _, rel := range rels {
		if i := find(rel); i < len(old) && old[i].rel == rel {
			spans = append(spans, span{i, i + 1})
		}
		// What is inside rel sorts from rel+"/" to rel+"0" ('/'+1); other
		// names may sort between rel and rel+"/" ("a", "a-b", "a/c").
		if lo, hi := find(rel+"/"), find(rel+"0"); lo < hi {
			spans = append(spans, span{lo, hi})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	n := len(old) + len(fresh)
	for _, s := range spans {
		n -= s.hi - s.lo
	}
	merged := make([]entry, 0, n)
	for i := 0; i < len(old); i++ {
		if len(spans) > 0 && i == spans[0].lo {
			i, spans = spans[0].hi-1, spans[1:]
			continue
		}
		for len(fresh) > 0 && fresh[0].rel < old[i].rel {
			merged, fresh = append(merged, fresh[0]), fresh[1:]
		}
		merged = append(merged, old[i])
	}
	return append(merged, fresh...)
}

// lookup is what a path in a plain tree is now.
type lookup int

const (
	lookupFound lookup = iota // it exists, under real directories
	lookupGone                // it, or a directory above it, no longer exists
	lookupOther               // a directory above it is a symlink, or it cannot be looked up
)

// lookupIn returns the Lstat of the visible path rel in the real root,
// checking that every directory above it is a real directory (seen records
// those checked before).
func lookupIn(root, rel string, seen map[string]lookup) (os.FileInfo, lookup) {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		up := rel[:i]
		found, ok := seen[up]
		if !ok {
			info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(up)))
			found = classify(err)
			if found == lookupFound && !info.IsDir() {
				found = lookupGone // a file now: nothing inside it
				if info.Mode()&fs.ModeSymlink != 0 {
					found = lookupOther
				}
			}
			seen[up] = found
		}
		if found != lookupFound {
			return nil, found
		}
	}
	info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
	return info, classify(err)
}

func classify(err error) lookup {
	switch {
	case err == nil:
		return lookupFound
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return lookupGone
	default:
		return lookupOther
	}
}
