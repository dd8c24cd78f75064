package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotreload/hotreload/internal/kubelet"
)

// countingHasher is a hasher that counts the files it opens.
func countingHasher(racy time.Duration) (hasher, *atomic.Int64) {
	var n atomic.Int64
	return hasher{racy: racy, open: func(name string) (*os.File, error) {
		n.Add(1)
		return openRegular(name)
	}}, &n
}

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
	var cache digestCache
	hash := func() [32]byte {
		t.Helper()
		res, err := h.hashWith(dir, hashOpts{cache: &cache})
		if err != nil {
			t.Fatal(err)
		}
		cache.commit()
		if want := mustHash(t, dir); res.sum != want {
			t.Fatalf("hash with the cache %x, without %x", res.sum[:6], want[:6])
		}
		return res.sum
	}
	reads := func(what string, want int64, change func()) {
		t.Helper()
		change()
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
	reads("removed files are forgotten", 0, func() {
		if err := os.Remove(f07); err != nil {
			t.Fatal(err)
		}
	})
	if got := len(cache.old); got != 19 {
		t.Errorf("cache holds %d files, want the 19 left", got)
	}
}

func TestDigestCacheRacy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	h, opens := countingHasher(time.Hour) // every file changed within the last hour
	var cache digestCache
	for range 2 {
		if _, err := h.hashWith(dir, hashOpts{cache: &cache}); err != nil {
			t.Fatal(err)
		}
		cache.commit()
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

// TestResyncReadsEverything checks that the resync is a full check: it
// reads every file again, whatever the cache remembers.
func TestResyncReadsEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	h, opens := countingHasher(time.Nanosecond)
	start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour, ResyncInterval: 20 * time.Millisecond}, func(w *Watcher) {
		w.hasher = h
	})
	// The marker volume holds one file; without the full check a resync
	// reads no settled file at all.
	base := opens.Load()
	waitFor(t, "two resyncs reading every file", func() bool {
		return opens.Load()-base >= int64(2*(len(baseFiles)+1))
	})
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

func TestVersionDir(t *testing.T) {
	for name, want := range map[string]bool{
		"..2026_11_23_08_00_00.123":        true,
		"..2026_11_23_08_00_00.3394099091": true,
		"..2026_11_23_08_00_00.":           false,
		"..2026_11_23_08_00_00":            false,
		"..2026-11-23_08_00_00.1":          false,
		"..2026_11_23_08_00_0x.1":          false,
		"..2026_11_23_08_00_00.1a":         false,
		"..data":                           false,
		"2026_11_23_08_00_00.123":          false,
		"":                                 false,
	} {
		if got := versionDir(name); got != want {
			t.Errorf("versionDir(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestOtherVersion(t *testing.T) {
	dir := t.TempDir()
	const cur, next = "..2026_11_23_08_00_00.123", "..2026_11_23_08_01_00.456"
	for _, d := range []string{cur, next, "..hand"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plain := t.TempDir()
	if err := os.Symlink(cur, filepath.Join(dir, dataLink)); err != nil {
		t.Fatal(err)
	}
	w, err := New(nil, nil, Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		want bool
	}{
		{"the next version", filepath.Join(dir, next), true},
		{"a deleted old version", filepath.Join(dir, "..2026_11_23_07_00_00.789"), true},
		{"the version ..data names", filepath.Join(dir, cur), false},
		{"..data", filepath.Join(dir, dataLink), false},
		{"..data_tmp", filepath.Join(dir, dataLink+"_tmp"), false},
		{"a hidden name not the kubelet's", filepath.Join(dir, "..hand"), false},
		{"a visible name", filepath.Join(dir, "app.conf"), false},
		{"a version-like name without ..data beside it", filepath.Join(plain, next), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := w.otherVersion(tc.path); got != tc.want {
				t.Errorf("otherVersion(%s) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
	t.Run("a watched one", func(t *testing.T) {
		p := filepath.Join(dir, next)
		w.index[p] = map[int]bool{0: true}
		defer delete(w.index, p)
		if w.otherVersion(p) {
			t.Errorf("otherVersion(%s) = true for a watched directory", p)
		}
	})
}
