package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

// countingHasher is a hasher that counts the files it opens.
func countingHasher(racy time.Duration) (hasher, *atomic.Int64) {
	var n atomic.Int64
	return hasher{racy: racy, open: func(name string) (*os.File, error) {
		n.Add(1)
		return openRegular(name)
	}}, &n
}

// TestDigestCache checks what a hash keeps for the next (see seen): a file
// whose stat is unchanged is not read again, and the stats tell whether
// anything changed at all (the resync's check).
func TestDigestCache(t *testing.T) {
	if !stampOf(mustStat(t, t.TempDir())).ok {
		t.Skip("no file stamps on this system: every hash reads every file")
	}
	dir := filepath.Join(t.TempDir(), "plain")
	files := make(map[string]string)
	for i := range 20 {
		files[fmt.Sprintf("d%d/f%02d.conf", i%3, i)] = fmt.Sprintf("value %d\n", i)
	}
	writeTree(t, dir, files)
	h, opens := countingHasher(time.Nanosecond)
	var last *seen
	hash := func() [32]byte {
		t.Helper()
		res, err := h.hash(dir, last, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = res.seen
		if want := mustHash(t, dir); res.sum != want {
			t.Fatalf("hash with the cache %x, without %x", res.sum[:6], want[:6])
		}
		return res.sum
	}
	reads := func(what string, want int64, change func()) {
		t.Helper()
		change()
		if unchanged := last.unchanged(); unchanged != (what == "nothing changed") {
			t.Errorf("%s: the stats say unchanged %v", what, unchanged)
		}
		opens.Store(0)
		hash()
		if got := opens.Load(); got != want {
			t.Errorf("%s: %d files read, want %d", what, got, want)
		}
	}
	waitTick := func(after fileStamp) {
		// File times come from a coarse clock: wait until a new change
		// gets a later change time than after's.
		t.Helper()
		probe := filepath.Join(t.TempDir(), "probe")
		waitFor(t, "a file time later than the last change", func() bool {
			if err := os.WriteFile(probe, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return stampOf(mustStat(t, probe)).ctime > after.ctime
		})
	}
	f07 := filepath.Join(dir, "d1/f07.conf")

	reads("first hash", 20, func() {})
	reads("nothing changed", 0, func() {})
	reads("one file grew", 1, func() {
		if err := os.WriteFile(f07, []byte("value 7, longer\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	reads("one file replaced by rename", 1, func() { writeAtomic(t, filepath.Join(dir, "d2/f05.conf"), "value 5\n") })
	reads("same size, modification time put back", 1, func() {
		before := stampOf(mustStat(t, f07))
		waitTick(before)
		if err := os.WriteFile(f07, []byte("VALUE 7, LONGER\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mtime := time.Unix(0, before.mtime)
		if err := os.Chtimes(f07, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	})
	reads("a chmod (its change time could hide a write)", 1, func() {
		if err := os.Chmod(f07, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	reads("an empty directory made", 0, func() {
		if err := os.Mkdir(filepath.Join(dir, "d1", "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	reads("removed files are forgotten", 0, func() {
		if err := os.Remove(f07); err != nil {
			t.Fatal(err)
		}
	})
	if got := len(last.files); got != 19 {
		t.Errorf("cache holds %d files, want the 19 left", got)
	}
}

// TestSeenWhole checks when the stats of a hash vouch for a volume: not
// when a symlink other than the kubelet's shows something (its target can
// change with no stat here changing), nor for a change within the racy
// window; and that the stats see a kubelet update (through the root's
// stamp alone, which vouches for the published version) and a root
// re-pointed.
func TestSeenWhole(t *testing.T) {
	if !stampOf(mustStat(t, t.TempDir())).ok {
		t.Skip("no file stamps on this system")
	}
	settledHash := func(t *testing.T, dir string) *seen {
		t.Helper()
		res, err := hasher{racy: time.Nanosecond}.hash(dir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.seen
	}
	t.Run("kubelet volume", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		vol := kubelet.New(dir)
		if _, err := vol.Write(payload(baseFiles)); err != nil {
			t.Fatal(err)
		}
		s := settledHash(t, dir)
		if !s.unchanged() {
			t.Fatal("a kubelet volume is not vouched for by its stats")
		}
		if _, err := vol.Write(payload(map[string]string{"app.properties": "v2"})); err != nil {
			t.Fatal(err)
		}
		if s.unchanged() {
			t.Error("a kubelet update is not seen by the stats")
		}
	})
	t.Run("..data names a directory elsewhere", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		elsewhere := filepath.Join(t.TempDir(), "v1")
		writeTree(t, elsewhere, map[string]string{"a": "1"})
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		symlink(t, elsewhere, filepath.Join(dir, dataLink))
		symlink(t, "..data/a", filepath.Join(dir, "a"))
		if settledHash(t, dir).unchanged() {
			t.Error("a version directory outside the root is vouched for by the root's stats")
		}
	})
	t.Run("root re-pointed", func(t *testing.T) {
		base := t.TempDir()
		writeTree(t, filepath.Join(base, "a"), baseFiles)
		writeTree(t, filepath.Join(base, "b"), baseFiles)
		root := filepath.Join(base, "root")
		symlink(t, "a", root)
		s := settledHash(t, root)
		if !s.unchanged() {
			t.Fatal("a root reached through a symlink is not vouched for by its stats")
		}
		relink(t, "b", root)
		if s.unchanged() {
			t.Error("a root re-pointed is not seen by the stats")
		}
	})
	t.Run("symlink in the volume", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		writeTree(t, dir, baseFiles)
		symlink(t, "app.properties", filepath.Join(dir, "link"))
		if settledHash(t, dir).unchanged() {
			t.Error("a volume with a symlink of its own is vouched for by its stats")
		}
	})
	t.Run("racy", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		writeTree(t, dir, baseFiles)
		res, err := hasher{racy: time.Hour}.hash(dir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.seen.unchanged() {
			t.Error("files changed within the racy window are vouched for by their stats")
		}
	})
}

func TestDigestCacheRacy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	h, opens := countingHasher(time.Hour) // every file changed within the last hour
	var last *seen
	for range 2 {
		res, err := h.hash(dir, last, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = res.seen
	}
	if got, want := opens.Load(), int64(2*len(baseFiles)); got != want {
		t.Errorf("two hashes of files changed just now read %d files, want %d (each read twice)", got, want)
	}
}

func mustStat(t testing.TB, name string) os.FileInfo {
	t.Helper()
	info, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestResyncReadsWhatChanged checks the resync: with nothing changed it
// walks nothing and reads nothing; a change that inotify missed is seen by
// its stats, and only the file changed is read.
func TestResyncReadsWhatChanged(t *testing.T) {
	if !stampOf(mustStat(t, t.TempDir())).ok {
		t.Skip("no file stamps on this system: the resync walks every volume")
	}
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	h, opens := countingHasher(time.Nanosecond)
	hr := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour, ResyncInterval: 20 * time.Millisecond}, func(w *Watcher) {
		noWatch(dir)(w)
		w.hasher = h
	})
	hr.quiet(t) // the marker is updated (plain.go), and walked by the next resync
	time.Sleep(100 * time.Millisecond)
	walks, reads := hr.metric("hashes"), opens.Load()
	time.Sleep(200 * time.Millisecond) // some ten resyncs, nothing to wait for
	if got := hr.metric("hashes") - walks; got != 0 {
		t.Errorf("%v walks in ten resyncs of unchanged volumes, want none", got)
	}
	if got := opens.Load() - reads; got != 0 {
		t.Errorf("%d files read in ten resyncs of unchanged volumes, want none", got)
	}

	writeTree(t, dir, map[string]string{"conf.d/default.conf": "listen 8080;\n"}) // no event: noWatch
	reads = opens.Load()
	hr.expect(t, dir, mustHash(t, dir))
	if got := opens.Load() - reads; got != 1 {
		t.Errorf("the resync read %d files for one changed, want 1", got)
	}
}

// TestKubeletUpdateReadsOnce checks that one kubelet update of a volume
// reads each of its files about once: the new version directory is watched
// before it is read (no second pass), the moment of ..data_tmp is not read,
// and the creation and deletion of version directories that ..data does not
// name make the volume dirty no more.
func TestKubeletUpdateReadsOnce(t *testing.T) {
	const keys, updates = 300, 3
	dir := filepath.Join(t.TempDir(), "vol")
	vol := kubelet.New(dir)
	files := make(map[string]string)
	for i := range keys {
		files[fmt.Sprintf("key%04d", i)] = "v1"
	}
	if _, err := vol.Write(payload(files)); err != nil {
		t.Fatal(err)
	}
	h, opens := countingHasher(0)
	hr := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) { w.hasher = h })
	base := opens.Load()
	for i := range updates {
		files["key0000"] = fmt.Sprint("v", i+2)
		if _, err := vol.Write(payload(files)); err != nil {
			t.Fatal(err)
		}
		hr.expect(t, dir, mustHash(t, dir))
	}
	hr.quiet(t)
	got := opens.Load() - base - int64(hr.markers) // each marker reads its one file
	t.Logf("%d kubelet updates of a %d-key volume read %d files (%.2f per key and update)", updates, keys, got, float64(got)/(keys*updates))
	if got > 2*keys*updates {
		t.Errorf("%d updates of %d keys read %d files, want at most twice each", updates, keys, got)
	}
}

// TestShows checks which names in a watched directory can change what an
// app sees: the kubelet's version directories other than the one ..data
// names, and ..data_tmp, cannot.
func TestShows(t *testing.T) {
	dir := t.TempDir()
	const cur, next = "..2026_11_23_08_00_00.123", "..2026_11_23_08_01_00.456"
	for _, d := range []string{cur, next} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(cur, filepath.Join(dir, dataLink)); err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	for _, tc := range []struct {
		name      string
		dir, base string
		want      bool
	}{
		{"a visible name", dir, "app.conf", true},
		{"..data", dir, dataLink, true},
		{"the version ..data names", dir, cur, true},
		{"the next version", dir, next, false},
		{"a deleted old version", dir, "..2026_11_23_07_00_00.789", false},
		{"..data_tmp", dir, dataLink + "_tmp", false},
		{"a hidden name without ..data beside it", plain, "..x", false},
		{"a visible name without ..data beside it", plain, "x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shows(tc.dir, tc.base); got != tc.want {
				t.Errorf("shows(%s, %s) = %v, want %v", tc.dir, tc.base, got, tc.want)
			}
		})
	}
}
