package watcher

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
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

// denySecrets is a hasher that cannot read files named "secret".
func denySecrets() hasher { return failOpen("secret", syscall.EACCES) }

// TestPlainDirRandom changes a watched plain tree at random, as writers do,
// and checks that the last Change after each step has the hash a walk
// gives now: creations, removals, renames over existing entries, new
// directories and unreadable files, all seen through inotify alone.
func TestPlainDirRandom(t *testing.T) {
	seed := testSeed(t)
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
		w.hasher = denySecrets()
		w.settle = time.Hour // a moment seen half-way is never reported
	})
	o := &treeOps{t: t, dir: dir, rng: rand.New(rand.NewPCG(uint64(seed), 1))}
	last := mustHash(t, dir)
	walks := h.metric("hashes")
	for step := range 60 {
		// Up to three changes at once: the watcher may see any moment
		// between them, and a file written in place twice may be seen
		// whole, truncated, and whole again.
		for range 1 + o.rng.IntN(3) {
			t.Logf("step %d names %v", step, o.apply())
		}
		want, err := denySecrets().hash(dir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := h.latest(t, dir); ok {
			last = got.Hash
		}
		if last != want.sum {
			t.Fatalf("step %d: the last Change has %x, a walk gives %x", step, last[:6], want.sum[:6])
		}
	}
	// Each step is one hash or more; the update (plain.go) spares the walk
	// of all but the steps that move or remove a directory, or make a file
	// unreadable (a tree with a problem is walked).
	walked := h.metric("hashes") - walks // the marker is a plain tree too: updated
	t.Logf("60 steps, %v walks", walked)
	if walked >= 60 {
		t.Errorf("60 steps walked the tree %v times: no update from the directories events named", walked)
	}
}

// TestRenamedSubtree renames a directory that holds directories, and
// writes into them afterwards. inotify keeps the watches of the moved
// directories, and fsnotify their old names: their events must still reach
// the volume, under the new paths. (Before the watch index knew directories
// by inode, the removal of the old paths removed the watches the new paths
// relied on, and later writes were never seen.) Once as a plain tree, once
// with a symlink in the volume.
func TestRenamedSubtree(t *testing.T) {
	for _, linked := range []bool{false, true} {
		t.Run(fmt.Sprintf("symlink in the volume %v", linked), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			writeTree(t, dir, map[string]string{"old/sub/deeper/f": "1", "x": "1"})
			if linked {
				symlink(t, "x", filepath.Join(dir, "link"))
			}
			h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
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
		})
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
