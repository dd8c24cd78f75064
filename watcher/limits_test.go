package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

// TestUnreadableRotation checks that a file hotreload cannot read (a 0600
// Secret item, another UID) is still watched by what can be seen of it:
// its rotation is reported and logged with the fix, while the kubelet's
// fsGroup chmod and identical rewrites are not.
func TestUnreadableRotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secret")
	vol := kubelet.New(dir)
	secret := map[string]string{"tls.key": "key-1", "tls.crt": "crt-1"}
	if _, err := vol.Write(payload(secret)); err != nil {
		t.Fatal(err)
	}
	// Root reads everything, so the permission error is injected.
	denied := failOpen("tls.key", syscall.EACCES)
	// The resync sees the rewrite in place at the end: the version
	// directory is not watched, since the kubelet never writes into it.
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour, ResyncInterval: 20 * time.Millisecond}, func(w *Watcher) {
		w.hasher = denied
		w.settle = 10 * time.Millisecond
	})
	current := func() [32]byte {
		t.Helper()
		res, err := denied.hash(dir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.sum
	}
	const hint = "set the pod's fsGroup, run hotreload as the file owner's runAsUser, or give the volume a defaultMode that lets group/others read"
	if n := strings.Count(h.logs.String(), "cannot read file"); n != 1 || !strings.Contains(h.logs.String(), hint) {
		t.Errorf("unreadable file logged %d times at start, want once with the fix:\n%s", n, h.logs)
	}

	for i := 2; i <= 3; i++ {
		secret["tls.key"] = fmt.Sprintf("key-%d", i) // the same size: only the inode tells
		if _, err := vol.Write(payload(secret)); err != nil {
			t.Fatal(err)
		}
		h.expect(t, dir, current())
		if n := strings.Count(h.logs.String(), "unreadable file changed"); n != i-1 {
			t.Errorf("rotation %d: change logged %d times, want %d:\n%s", i, n, i-1, h.logs)
		}
	}
	if !strings.Contains(h.logs.String(), "path=tls.key") || !strings.Contains(h.logs.String(), "inode ") {
		t.Errorf("change log lacks the path or what changed:\n%s", h.logs)
	}
	if strings.Count(h.logs.String(), hint) != 3 {
		t.Errorf("every warning about the file should name the fix:\n%s", h.logs)
	}

	if _, err := vol.Write(payload(secret)); err != nil { // identical: nothing written
		t.Fatal(err)
	}
	if err := vol.Chmod(); err != nil { // fsGroup: ctime changes, content does not
		t.Fatal(err)
	}
	h.quiet(t)

	// Rewritten in place (by someone other than the kubelet): the
	// modification time tells, at the next resync. Reported after the
	// settle bound, as an in-place change of a published version.
	version, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, version, "tls.key"), later, later); err != nil {
		t.Fatal(err)
	}
	h.eventually(t, dir, current())
	if !strings.Contains(h.logs.String(), "mtime ") {
		t.Errorf("change log does not name the mtime:\n%s", h.logs)
	}
}

// TestWatchLimit runs out of inotify watches for two volumes: one line
// names the sysctl and how many watches are needed, both volumes are polled,
// and once watches are available again both go back to inotify and the poll
// ticker stops.
func TestWatchLimit(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	writeVolume(t, a, baseFiles)
	writeVolume(t, b, baseFiles)
	var full atomic.Bool
	full.Store(true)
	h := start(t, Options{Dirs: []string{a, b}, PollInterval: 20 * time.Millisecond}, func(w *Watcher) {
		w.addWatch = func(in *inotify, path string) (int, error) {
			if full.Load() && (strings.HasPrefix(path, a) || strings.HasPrefix(path, b)) {
				return 0, fmt.Errorf("add watch: %w", syscall.ENOSPC) // the marker keeps inotify
			}
			return in.add(path)
		}
	})
	for _, dir := range []string{a, b} {
		writeVolume(t, dir, map[string]string{"v": dir})
		h.expect(t, dir, mustHash(t, dir))
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "fs.inotify.max_user_watches"); n != 1 {
		t.Errorf("the sysctl named %d times, want once for both volumes:\n%s", n, logs)
	}
	// Each volume: its root (the version directory and its subdirectories
	// are not watched); and the marker's root.
	if !strings.Contains(logs, "needs 3 watches") {
		t.Errorf("the limit line does not count 3 watches:\n%s", logs)
	}
	if !h.w.ticking.Load() {
		t.Error("the poll ticker is off while volumes are polled")
	}

	full.Store(false)
	waitFor(t, "both volumes back on inotify", func() bool {
		return strings.Count(h.logs.String(), "watching with inotify again instead of polling") == 2
	})
	waitFor(t, "poll ticker stopped", func() bool { return !h.w.ticking.Load() })
	h.quiet(t)
	events := h.metric("events")
	writeVolume(t, a, map[string]string{"v": "inotify"})
	h.expect(t, a, mustHash(t, a)) // no poll ticker: inotify saw it
	if h.metric("events") == events {
		t.Error("no inotify event counted for a change seen without polling")
	}
	if got := h.metric("errors"); got != 2 {
		t.Errorf("hotreload_watch_errors_total = %v, want 2 (one fallback per volume)", got)
	}
}

// TestInotifyInstancesExhausted starts without an inotify instance: the
// sysctl is named once, volumes are polled, and inotify is tried again on
// every poll tick until it works.
func TestInotifyInstancesExhausted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	writeVolume(t, dir, baseFiles)
	var failures atomic.Int32
	failures.Store(3)
	h := start(t, Options{Dirs: []string{dir}, PollInterval: 20 * time.Millisecond}, func(w *Watcher) {
		w.newInotify = func() (*inotify, error) {
			if failures.Add(-1) >= 0 {
				return nil, fmt.Errorf("inotify_init1: %w", syscall.EMFILE)
			}
			return newInotify()
		}
	})
	waitFor(t, "inotify back", func() bool { return strings.Contains(h.logs.String(), "inotify available again") })
	waitFor(t, "poll ticker stopped", func() bool { return !h.w.ticking.Load() })
	h.quiet(t)
	if n := strings.Count(h.logs.String(), "fs.inotify.max_user_instances"); n != 1 {
		t.Errorf("the sysctl named %d times, want once:\n%s", n, h.logs)
	}
	events := h.metric("events")
	writeVolume(t, dir, map[string]string{"v": "2"})
	h.expect(t, dir, mustHash(t, dir))
	if h.metric("events") == events {
		t.Error("no inotify event counted after inotify came back")
	}
	if got := h.metric("errors"); got != 1 {
		t.Errorf("hotreload_watch_errors_total = %v, want 1", got)
	}
}

// TestPollTickerIdle checks that the poll ticker runs only while a volume
// is missing or polled.
func TestPollTickerIdle(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "vol")
	writeVolume(t, dir, baseFiles)
	h := start(t, Options{Dirs: []string{dir}, PollInterval: 20 * time.Millisecond}, nil)
	if h.w.ticking.Load() {
		t.Error("the poll ticker runs with every volume on inotify")
	}
	if err := os.Rename(dir, filepath.Join(base, "gone")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "poll ticker running for the missing volume", h.w.ticking.Load)
	if err := os.Rename(filepath.Join(base, "gone"), dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "poll ticker stopped", func() bool { return !h.w.ticking.Load() })
	h.quiet(t)
}

// TestOldVersionUnwatched checks that the kubelet's deletion of the old
// version directory costs no events: no version directory is watched, the
// kubelet never writes into a published one.
func TestOldVersionUnwatched(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	files := make(map[string]string)
	for i := range 1000 { // in directories, which a hash walks
		files[fmt.Sprintf("d%d/key%04d", i%10, i)] = "v1"
	}
	vol := kubelet.New(dir)
	if _, err := vol.Write(payload(files)); err != nil {
		t.Fatal(err)
	}
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
	events := h.metric("events")
	files["d0/key0000"] = "v2"
	if _, err := vol.Write(payload(files)); err != nil {
		t.Fatal(err)
	}
	h.expect(t, dir, mustHash(t, dir))
	h.quiet(t)
	got := h.metric("events") - events
	t.Logf("a 1-key change in a 1000-key volume: %v inotify events", got)
	if got > 100 {
		t.Errorf("%v events for a 1-key change: the old version's deletion was watched", got)
	}
}

// TestNewDirWatchLimit runs out of inotify watches for a new subdirectory
// of a plain directory: the volume is polled, its changes are still seen,
// and once watches are available again it goes back to inotify.
func TestNewDirWatchLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plain")
	writeTree(t, dir, baseFiles)
	var full atomic.Bool
	h := start(t, Options{Dirs: []string{dir}, PollInterval: 20 * time.Millisecond}, func(w *Watcher) {
		w.addWatch = func(in *inotify, path string) (int, error) {
			if full.Load() && strings.HasPrefix(path, dir) {
				return 0, fmt.Errorf("add watch: %w", syscall.ENOSPC)
			}
			return in.add(path)
		}
	})
	full.Store(true)
	writeTree(t, dir, map[string]string{"new/a.conf": "1"}) // its directory cannot be watched
	h.eventually(t, dir, mustHash(t, dir))
	writeTree(t, dir, map[string]string{"new/a.conf": "2"}) // seen by the poll alone
	h.eventually(t, dir, mustHash(t, dir))

	full.Store(false)
	waitFor(t, "back on inotify", func() bool {
		return strings.Contains(h.logs.String(), "watching with inotify again instead of polling")
	})
	waitFor(t, "poll ticker stopped", func() bool { return !h.w.ticking.Load() })
	h.quiet(t)
	events := h.metric("events")
	writeTree(t, dir, map[string]string{"new/a.conf": "3"})
	h.eventually(t, dir, mustHash(t, dir))
	if h.metric("events") == events {
		t.Error("no inotify event counted for an edit seen without polling")
	}
}
