package watcher

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestTreeUpdateMatchesWalk changes a plain tree at random and checks,
// after each batch, that the update from the directories inotify names
// gives what a walk gives (the hash, the directories, the unreadable
// files), unless a directory was moved or removed, which
// the watcher walks.
func TestTreeUpdateMatchesWalk(t *testing.T) {
	seed := testSeed(t)
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	o := &treeOps{t: t, dir: dir, rng: rand.New(rand.NewPCG(uint64(seed), 0))}
	h := denySecrets()
	full, err := h.hash(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tree, last := full.tree, full.seen
	if tree == nil {
		t.Fatal("a plain directory has no plainTree")
	}
	updates := 0
	for batch := range 300 {
		var named []string
		for range 1 + o.rng.IntN(3) {
			named = append(named, o.apply()...)
		}
		// inotify names the topmost entry created, removed or renamed, in
		// its parent directory; a directory the tree knows can only be
		// named if it was moved or removed (the watcher then walks).
		moved := false
		dirty := make(map[string]bool)
		for _, p := range named {
			_, wasDir := tree.dirs[p]
			moved = moved || wasDir
			if _, known := tree.dirs[filepath.Dir(p)]; known {
				dirty[filepath.Dir(p)] = true
			}
		}
		want, err := h.hash(dir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for d := range dirty {
			dirs = append(dirs, d)
		}
		res, ok := h.update(tree, last, dirs, nil)
		switch {
		case moved:
		case !ok:
			t.Fatalf("batch %d: update fell back to a walk for %v", batch, named)
		case res.sum != want.sum:
			t.Fatalf("batch %d (paths %v): update gives %x, a walk %x", batch, named, res.sum[:6], want.sum[:6])
		case len(res.tree.dirs) != len(want.tree.dirs):
			t.Fatalf("batch %d: update knows %d directories, a walk %d", batch, len(res.tree.dirs), len(want.tree.dirs))
		case !slices.Equal(problemPaths(res.problems), problemPaths(want.problems)):
			t.Fatalf("batch %d: update has problems %v, a walk %v", batch, problemPaths(res.problems), problemPaths(want.problems))
		case !maps.Equal(res.unreadable, want.unreadable):
			t.Fatalf("batch %d: update has unreadable files %v, a walk %v", batch, res.unreadable, want.unreadable)
		default:
			updates++
		}
		tree, last = want.tree, want.seen
		if ok && !moved {
			tree, last = res.tree, res.seen
		}
	}
	t.Logf("%d of 300 batches updated, the others moved or removed a directory", updates)
	if updates == 0 {
		t.Error("no batch was updated")
	}
}

// TestTreeUpdateReadsWhatChanged checks that an edit of one file in a plain
// directory of 1000 files reads that file alone.
func TestTreeUpdateReadsWhatChanged(t *testing.T) {
	dir := manyFiles(t, 1000)
	h, opens := countingHasher(time.Nanosecond)
	full, err := h.hash(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"d07/f00007.conf": "new value"})
	before := opens.Load()
	res, ok := h.update(full.tree, full.seen, []string{filepath.Join(dir, "d07")}, nil)
	if !ok || res.tree == nil {
		t.Fatal("no update")
	}
	if got := opens.Load() - before; got != 1 {
		t.Errorf("an edit of one file read %d files, want 1", got)
	}
	if want := mustHash(t, dir); res.sum != want {
		t.Errorf("update gives %x, a walk %x", res.sum[:6], want[:6])
	}
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

// BenchmarkTreeUpdate measures the update of a plain tree of 10,000 files
// after one of them is rewritten, beside a walk that reads none again.
func BenchmarkTreeUpdate(b *testing.B) {
	dir := manyFiles(b, 10000)
	h := hasher{racy: time.Nanosecond}
	full, err := h.hash(dir, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	d07 := []string{filepath.Join(dir, "d07")}
	b.Run("update", func(b *testing.B) {
		for b.Loop() {
			if _, ok := h.update(full.tree, full.seen, d07, nil); !ok {
				b.Fatal("no update")
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.hash(dir, full.seen, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func problemPaths(ps []problem) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.path+" "+problemKind(p.err))
	}
	slices.Sort(s)
	return s
}
