package watcher

import (
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// treeOps changes a plain tree at random, the way writers do, and returns
// the paths that inotify names for each change (the least it names: the
// topmost entry created, removed or renamed).
type treeOps struct {
	t    *testing.T
	dir  string
	rng  *rand.Rand
	step int
}

// randomPath returns a visible path of depth 1 to 3 from a small set of
// names, so that operations meet each other's files and directories.
func (o *treeOps) randomPath() string {
	parts := []string{[]string{"a", "a-b", "b"}[o.rng.IntN(3)]}
	for range o.rng.IntN(3) {
		parts = append(parts, []string{"x", "y", "z.conf"}[o.rng.IntN(3)])
	}
	return strings.Join(parts, "/")
}

// existing returns a random visible entry of the tree, or "".
func (o *treeOps) existing() string {
	var all []string
	filepath.WalkDir(o.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != o.dir {
			rel, _ := filepath.Rel(o.dir, p)
			all = append(all, filepath.ToSlash(rel))
		}
		return nil
	})
	if len(all) == 0 {
		return ""
	}
	return all[o.rng.IntN(len(all))]
}

// created makes the directories above rel and returns the topmost one that
// did not exist, or rel if they all did.
func (o *treeOps) created(rel string) string {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		up := strings.Join(parts[:i], "/")
		info, err := os.Lstat(o.abs(up))
		if err != nil {
			if err := os.MkdirAll(o.abs(path(parts[:len(parts)-1])), 0o755); err != nil {
				o.t.Fatal(err)
			}
			return up
		}
		if !info.IsDir() {
			return "" // a file where a directory would go
		}
	}
	return rel
}

func path(parts []string) string { return strings.Join(parts, "/") }

func (o *treeOps) abs(rel string) string { return filepath.Join(o.dir, filepath.FromSlash(rel)) }

// apply does one random change and returns the real paths inotify names.
func (o *treeOps) apply() []string {
	o.step++
	switch o.rng.IntN(6) {
	case 0, 1: // write a file, making its directories
		rel := o.randomPath()
		named := o.created(rel)
		if named == "" {
			return nil
		}
		if info, err := os.Lstat(o.abs(rel)); err == nil && info.IsDir() {
			return nil
		}
		if err := os.WriteFile(o.abs(rel), fmt.Appendf(nil, "step %d\n", o.step), 0o644); err != nil {
			o.t.Fatal(err)
		}
		return []string{o.abs(named)}
	case 2: // remove a file or a whole directory
		rel := o.existing()
		if rel == "" {
			return nil
		}
		if err := os.RemoveAll(o.abs(rel)); err != nil {
			o.t.Fatal(err)
		}
		return []string{o.abs(rel)}
	case 3: // rename an entry, over whatever the new name holds
		from, to := o.existing(), o.randomPath()
		if from == "" || to == from || strings.HasPrefix(to, from+"/") || strings.HasPrefix(from, to+"/") {
			return nil
		}
		named := o.created(to)
		if named == "" {
			return nil
		}
		if err := os.RemoveAll(o.abs(to)); err != nil {
			o.t.Fatal(err)
		}
		if err := os.Rename(o.abs(from), o.abs(to)); err != nil {
			o.t.Fatal(err)
		}
		return []string{o.abs(from), o.abs(named)}
	case 4: // an empty directory
		rel := o.randomPath()
		named := o.created(rel)
		if named == "" || os.Mkdir(o.abs(rel), 0o755) != nil {
			return nil
		}
		return []string{o.abs(named)}
	default: // a file made unreadable (the hasher below denies "secret")
		rel := o.existing()
		if rel == "" {
			return nil
		}
		dir := o.abs(rel)
		if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
			dir = filepath.Dir(dir)
		}
		name := filepath.Join(dir, "secret")
		if err := os.WriteFile(name, fmt.Appendf(nil, "secret %d\n", o.step), 0o600); err != nil {
			o.t.Fatal(err)
		}
		return []string{name}
	}
}

// testSeed returns the seed of a random test: $HOTRELOAD_SEED to repeat a
// run, else the time. It is logged.
func testSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano()
	if s := os.Getenv("HOTRELOAD_SEED"); s != "" {
		if _, err := fmt.Sscan(s, &seed); err != nil {
			t.Fatalf("HOTRELOAD_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (HOTRELOAD_SEED=%d repeats this run)", seed, seed)
	return seed
}

// manyFiles writes n small files into 100 directories of a new plain
// directory, and returns its path.
func manyFiles(tb testing.TB, n int) string {
	dir := filepath.Join(tb.TempDir(), "plain")
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("d%02d/f%05d.conf", i%100, i)] = fmt.Sprint("value ", i)
	}
	writeTree(tb, dir, files)
	return dir
}

// denySecrets is a hasher that cannot read files named "secret".
func denySecrets() hasher {
	return hasher{open: func(name string) (*os.File, error) {
		if filepath.Base(name) == "secret" {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
		}
		return openRegular(name)
	}}
}

// TestTreeUpdateMatchesWalk changes a plain tree at random and checks,
// after each batch of changes, that the update from the paths inotify names
// gives what a walk gives: the hash, the directories to watch, the problems
// and the unreadable files.
func TestTreeUpdateMatchesWalk(t *testing.T) {
	seed := testSeed(t)
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	o := &treeOps{t: t, dir: dir, rng: rand.New(rand.NewPCG(uint64(seed), 0))}
	h := denySecrets()
	full, err := h.hash(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree := full.tree
	if tree == nil {
		t.Fatal("a plain directory has no plainTree")
	}
	for batch := range 300 {
		var paths []string
		for range 1 + o.rng.IntN(3) {
			paths = append(paths, o.apply()...)
		}
		res, ok := h.update(tree, paths)
		if !ok {
			t.Fatalf("batch %d: update fell back to a walk for %v", batch, paths)
		}
		if res.tree == nil {
			t.Fatalf("batch %d: update found a partial state (%s) with nobody at work", batch, res.partial)
		}
		want, err := h.hash(dir)
		if err != nil {
			t.Fatal(err)
		}
		if res.sum != want.sum {
			t.Fatalf("batch %d (paths %v): update gives %x, a walk %x", batch, paths, res.sum[:6], want.sum[:6])
		}
		if !maps.Equal(res.dirs, want.dirs) {
			t.Fatalf("batch %d: update watches %v, a walk %v", batch, slices.Sorted(maps.Keys(res.dirs)), slices.Sorted(maps.Keys(want.dirs)))
		}
		if got, want := problemPaths(res.problems), problemPaths(want.problems); !slices.Equal(got, want) {
			t.Fatalf("batch %d: update has problems %v, a walk %v", batch, got, want)
		}
		if !maps.Equal(res.unreadable, want.unreadable) && len(res.unreadable)+len(want.unreadable) > 0 {
			t.Fatalf("batch %d: update has unreadable files %v, a walk %v", batch, res.unreadable, want.unreadable)
		}
		tree = res.tree
	}
}

func problemPaths(ps []problem) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.path+" "+problemKind(p.err))
	}
	slices.Sort(s)
	return s
}

// TestTreeUpdateReadsWhatChanged checks that an edit of one file in a plain
// directory of 1000 files reads that file alone.
func TestTreeUpdateReadsWhatChanged(t *testing.T) {
	dir := manyFiles(t, 1000)
	h, opens := countingHasher(0)
	full, err := h.hash(dir)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, "d07", "f00007.conf")
	writeTree(t, dir, map[string]string{"d07/f00007.conf": "new value"})
	before := opens.Load()
	res, ok := h.update(full.tree, []string{edited})
	if !ok || res.tree == nil {
		t.Fatalf("update: ok %v, partial %q", ok, res.partial)
	}
	if got := opens.Load() - before; got != 1 {
		t.Errorf("an edit of one file read %d files, want 1", got)
	}
	if want := mustHash(t, dir); res.sum != want {
		t.Errorf("update gives %x, a walk %x", res.sum[:6], want[:6])
	}
}

// TestTreeFallsBack checks what makes a volume walked instead: what a plain
// tree cannot hold, and paths it cannot place.
func TestTreeFallsBack(t *testing.T) {
	t.Run("no tree", func(t *testing.T) {
		for name, setup := range map[string]func(t *testing.T, dir string){
			"a symlink": func(t *testing.T, dir string) { symlink(t, "app.properties", filepath.Join(dir, "link")) },
			"a hard link": func(t *testing.T, dir string) {
				if err := os.Link(filepath.Join(dir, "app.properties"), filepath.Join(t.TempDir(), "other")); err != nil {
					t.Fatal(err)
				}
			},
			"a kubelet volume": func(t *testing.T, dir string) {
				os.RemoveAll(dir)
				writeVolume(t, dir, baseFiles)
			},
		} {
			t.Run(name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "vol")
				writeTree(t, dir, baseFiles)
				setup(t, dir)
				res, err := hasher{}.hash(dir)
				if err != nil {
					t.Fatal(err)
				}
				if res.tree != nil {
					t.Error("walked as a plain tree")
				}
			})
		}
	})
	for name, change := range map[string]func(t *testing.T, dir string) []string{
		"a symlink created": func(t *testing.T, dir string) []string {
			symlink(t, "app.properties", filepath.Join(dir, "link"))
			return []string{filepath.Join(dir, "link")}
		},
		"a directory replaced by a symlink, seen through a file inside": func(t *testing.T, dir string) []string {
			os.RemoveAll(filepath.Join(dir, "conf.d"))
			other := t.TempDir()
			writeTree(t, other, map[string]string{"default.conf": "x"})
			symlink(t, other, filepath.Join(dir, "conf.d"))
			return []string{filepath.Join(dir, "conf.d", "default.conf")}
		},
		"a file hard-linked": func(t *testing.T, dir string) []string {
			if err := os.Link(filepath.Join(dir, "app.properties"), filepath.Join(dir, "conf.d", "copy")); err != nil {
				t.Fatal(err)
			}
			return []string{filepath.Join(dir, "conf.d", "copy")}
		},
		"..data created": func(t *testing.T, dir string) []string {
			os.Mkdir(filepath.Join(dir, "..v1"), 0o755)
			symlink(t, "..v1", filepath.Join(dir, dataLink))
			return []string{filepath.Join(dir, dataLink)}
		},
		"the root itself": func(t *testing.T, dir string) []string { return []string{dir} },
		"a path outside":  func(t *testing.T, dir string) []string { return []string{filepath.Dir(dir) + "/elsewhere"} },
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			writeTree(t, dir, baseFiles)
			full, err := hasher{}.hash(dir)
			if err != nil {
				t.Fatal(err)
			}
			if full.tree == nil {
				t.Fatal("a plain directory has no plainTree")
			}
			if _, ok := (hasher{}).update(full.tree, change(t, dir)); ok {
				t.Error("updated in place, want a walk")
			}
		})
	}
	t.Run("hidden below the root", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		writeTree(t, dir, baseFiles)
		full, err := hasher{}.hash(dir)
		if err != nil {
			t.Fatal(err)
		}
		writeTree(t, dir, map[string]string{"conf.d/..hidden": "x"})
		res, ok := hasher{}.update(full.tree, []string{filepath.Join(dir, "conf.d", "..hidden")})
		if !ok || res.sum != full.sum {
			t.Errorf("a hidden entry below the root: ok %v, changed %v; want it ignored", ok, res.sum != full.sum)
		}
	})
}

// TestPlainDirWithoutWalks changes a watched plain tree at random and checks
// that each change is reported with the hash a walk gives, while the volume
// is never walked again after the start: every event names what it changed.
func TestPlainDirWithoutWalks(t *testing.T) {
	seed := testSeed(t)
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
		w.hasher = denySecrets()
		w.settle = time.Hour // no walk after a moment seen half-way
	})
	walks := h.metric("hashes")
	o := &treeOps{t: t, dir: dir, rng: rand.New(rand.NewPCG(uint64(seed), 1))}
	last := mustHash(t, dir)
	for step := range 60 {
		// Up to three changes at once: the watcher may see any moment
		// between them, and a file written in place twice may be seen
		// whole, truncated, and whole again.
		for range 1 + o.rng.IntN(3) {
			t.Logf("step %d names %v", step, o.apply())
		}
		want, err := denySecrets().hash(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := h.latest(t, dir); ok {
			last = got.Hash
		}
		if last != want.sum {
			if tree := h.w.vols[0].tree; tree != nil && want.tree != nil {
				logDiff(t, tree.entries, want.tree.entries)
			}
			t.Fatalf("step %d: the last Change has %x, a walk gives %x", step, last[:6], want.sum[:6])
		}
	}
	// A walk reads a moment an update caught in the middle (an entry
	// vanished while it was read); the rest are updates.
	walked, updates := h.metric("hashes")-walks, h.w.treeUpdates.Load()
	t.Logf("%v walks, %d updates", walked, updates)
	if updates == 0 || walked > float64(updates)/10 {
		t.Errorf("the plain tree was walked %v times after the start and updated %d times, want updates and at most one walk in ten", walked, updates)
	}
}

// TestRenamedSubtree renames a directory that holds directories, and
// writes into them afterwards. inotify keeps the watches of the moved
// directories, and fsnotify their old names: their events must still reach
// the volume, under the new paths. (Before the watch index knew directories
// by inode, the removal of the old paths removed the watches the new paths
// relied on, and later writes were never seen.) Once as a plain tree, once
// with a symlink in the volume, which makes it walked.
func TestRenamedSubtree(t *testing.T) {
	for _, linked := range []bool{false, true} {
		t.Run(fmt.Sprintf("symlink in the volume %v", linked), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			writeTree(t, dir, map[string]string{"old/sub/deeper/f": "1", "x": "1"})
			if linked {
				symlink(t, "x", filepath.Join(dir, "link"))
			}
			h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
			walks := h.metric("hashes")
			if err := os.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "new")); err != nil {
				t.Fatal(err)
			}
			h.eventually(t, dir, mustHash(t, dir))
			h.quiet(t)
			for i, f := range []string{"new/sub/g", "new/sub/deeper/g", "new/sub/deeper/f"} {
				writeTree(t, dir, map[string]string{f: fmt.Sprint("write ", i)})
				h.eventually(t, dir, mustHash(t, dir))
			}
			// The old name, made again, is a directory of its own.
			writeTree(t, dir, map[string]string{"old/sub/h": "2"})
			h.eventually(t, dir, mustHash(t, dir))
			writeTree(t, dir, map[string]string{"new/sub/deeper/f": "last"})
			h.eventually(t, dir, mustHash(t, dir))
			h.quiet(t)
			// Moved again, its name made again at once, both written into.
			if err := os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "again")); err != nil {
				t.Fatal(err)
			}
			writeTree(t, dir, map[string]string{"new/sub/deeper/k": "3"})
			for i, f := range []string{"again/sub/deeper/f", "new/sub/deeper/k", "again/sub/g"} {
				writeTree(t, dir, map[string]string{f: fmt.Sprint("again ", i)})
				h.eventually(t, dir, mustHash(t, dir))
			}
			h.quiet(t)
			// The marker volume is a plain tree: never walked again.
			if walked := h.metric("hashes") > walks; walked != linked {
				t.Errorf("walked again: %v, want %v", walked, linked)
			}
		})
	}
}

// BenchmarkTreeUpdate measures the update of a plain tree of 10,000 files
// after one of them is rewritten, beside a walk that reads none again.
func BenchmarkTreeUpdate(b *testing.B) {
	dir := manyFiles(b, 10000)
	h := hasher{racy: time.Nanosecond}
	var cache digestCache
	full, err := h.hashWith(dir, hashOpts{cache: &cache})
	if err != nil {
		b.Fatal(err)
	}
	cache.commit()
	edited := filepath.Join(dir, "d07", "f00007.conf")
	b.Run("update", func(b *testing.B) {
		for b.Loop() {
			if res, ok := h.update(full.tree, []string{edited}); !ok || res.tree == nil {
				b.Fatal("no update")
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.hashWith(dir, hashOpts{cache: &cache}); err != nil {
				b.Fatal(err)
			}
			cache.commit()
		}
	})
}

// logDiff logs the entries that differ between a plain tree's and a walk's.
func logDiff(t *testing.T, got, want []entry) {
	index := func(es []entry) map[string]entry {
		m := make(map[string]entry, len(es))
		for _, e := range es {
			m[e.rel] = e
		}
		return m
	}
	g, w := index(got), index(want)
	for rel, e := range g {
		if we, ok := w[rel]; !ok || we != e {
			t.Logf("tree has %s (%c, %d bytes, %x); the walk: %v", rel, e.kind, e.size, e.digest[:4], ok)
		}
	}
	for rel, e := range w {
		if _, ok := g[rel]; !ok {
			t.Logf("the walk has %s (%c, %d bytes), the tree not", rel, e.kind, e.size)
		}
	}
}

// latest waits until every event so far has been handled, and returns the
// last Change for dir since the last call, if any (see harness).
func (h *harness) latest(t *testing.T, dir string) (last Change, ok bool) {
	t.Helper()
	h.markers++
	writeAtomic(t, filepath.Join(h.marker, "marker"), fmt.Sprint(h.markers))
	marker := mustHash(t, h.marker)
	seen := false
	deadline := time.Now().Add(timeout)
	for {
		select {
		case c := <-h.w.Changes():
			switch {
			case c.Dir == dir:
				last, ok = c, true
			case c.Dir == h.marker && c.Hash == marker:
				seen = true
			}
			continue
		default:
		}
		if seen && h.w.idle() && len(h.w.Changes()) == 0 {
			return last, ok
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher not done with the marker within %s", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDirtyPathsBound checks that a volume keeps at most maxDirtyPaths
// paths between two hashes, and that a mark without a path, or one past the
// bound, makes the next hash a walk.
func TestDirtyPathsBound(t *testing.T) {
	var v volume
	for i := range maxDirtyPaths {
		v.note(fmt.Sprintf("/vol/f%d", i))
	}
	paths, all := v.takeDirty()
	if len(paths) != maxDirtyPaths || all {
		t.Fatalf("after %d paths: %d paths, walk %v; want them all, no walk", maxDirtyPaths, len(paths), all)
	}
	for i := range maxDirtyPaths + 1 {
		v.note(fmt.Sprintf("/vol/f%d", i))
	}
	if paths, all := v.takeDirty(); len(paths) != 0 || !all {
		t.Errorf("after %d paths: %d paths, walk %v; want a walk", maxDirtyPaths+1, len(paths), all)
	}
	v.note("/vol/a")
	v.note("")
	v.note("/vol/b")
	if paths, all := v.takeDirty(); len(paths) != 0 || !all {
		t.Errorf("after a mark without a path: %d paths, walk %v; want a walk", len(paths), all)
	}
	if paths, all := v.takeDirty(); len(paths) != 0 || all {
		t.Errorf("taken twice: %d paths, walk %v; want nothing", len(paths), all)
	}
}
