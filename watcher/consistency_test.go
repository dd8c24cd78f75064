package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

// TestNoChangeBetweenSwapAndLinks stops the kubelet right after the rename
// of ..data, before the visible link of a new key exists and before the
// link of a vanished key is gone: the app cannot see the new version yet,
// so no Change may be sent; one Change follows once the links are done.
func TestNoChangeBetweenSwapAndLinks(t *testing.T) {
	tests := []struct {
		name     string
		from, to map[string]string
	}{
		{"new key", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}},
		{"vanished key", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}},
		{"key replaced", map[string]string{"a": "1"}, map[string]string{"b": "1"}},
		{"new nested key", map[string]string{"a": "1"}, map[string]string{"a": "1", "d/e/f": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "config")
			vol := kubelet.New(dir)
			if _, err := vol.Write(payload(tt.from)); err != nil {
				t.Fatal(err)
			}
			h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
				w.settle = time.Hour // the fallback must not fire here
			})
			swapped := false
			vol.AfterSwap = func() {
				swapped = true
				h.quiet(t) // the rename was seen, and nothing sent
			}
			if _, err := vol.Write(payload(tt.to)); err != nil {
				t.Fatal(err)
			}
			if !swapped {
				t.Fatal("AfterSwap was not called")
			}
			h.expect(t, dir, plainHash(t, tt.to))
			h.quiet(t)
		})
	}
}

// TestStuckMidUpdate checks the bounded fallback: a directory that looks
// like a kubelet volume half-way through an update, and stays so, is
// reported after the bound, with a warning.
func TestStuckMidUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	writeVolume(t, dir, map[string]string{"a": "1"})
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
		w.settle = 50 * time.Millisecond
	})
	// A hand-made new version whose key b never gets its visible link.
	writeTree(t, dir, map[string]string{"..v2/a": "2", "..v2/b": "2"})
	symlink(t, "..v2", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	h.expect(t, dir, plainHash(t, map[string]string{"a": "2"}))
	if !strings.Contains(h.logs.String(), "still looks half-way through an update") {
		t.Errorf("no warning for the stuck volume:\n%s", h.logs)
	}
	h.quiet(t)
}

// TestStress runs many kubelet updates that add a key and remove one, at
// the speed of the kubelet imitation, and checks every Change as it
// arrives: the new key must already be visible through its name, and the
// hash must be that of the new content.
func TestStress(t *testing.T) {
	rounds := 500
	if testing.Short() {
		rounds = 50
	}
	for _, keys := range []int{1, 50} {
		t.Run(fmt.Sprintf("%d keys", keys), func(t *testing.T) {
			missed, wrong := stress(t, keys, rounds)
			t.Logf("%d keys: %d rounds, new key not yet visible at the Change in %d (%.1f%%), wrong hash in %d",
				keys, rounds, missed, 100*float64(missed)/float64(rounds), wrong)
			if missed != 0 || wrong != 0 {
				t.Errorf("%d Changes came before the new key was visible, %d had another hash", missed, wrong)
			}
		})
	}
}

// BenchmarkMissedKeys prints the rate of Changes that came before the new
// key of a kubelet update was visible, over 500 updates (it must be 0).
func BenchmarkMissedKeys(b *testing.B) {
	const rounds = 500
	missed, wrong := 0, 0
	for b.Loop() {
		m, w := stress(b, 1, rounds)
		missed, wrong = missed+m, wrong+w
	}
	rate := float64(missed) / float64(rounds*b.N)
	b.ReportMetric(100*rate, "missed-%")
	fmt.Printf("BenchmarkMissedKeys: %d kubelet updates adding a key, Change before the key was visible: %d (%.1f%%), wrong hash: %d\n",
		rounds*b.N, missed, 100*rate, wrong)
}

// stress drives rounds kubelet updates of a volume with keys keys, each
// replacing one key by a new one, and checks each Change as it arrives. It
// returns how many Changes came before the new key was visible through its
// name, and how many had another hash than the new content's.
func stress(t testing.TB, keys, rounds int) (missed, wrong int) {
	dir := filepath.Join(t.TempDir(), "config")
	vol := kubelet.New(dir)
	files := func(round int) map[string]string {
		f := make(map[string]string, keys)
		for k := range keys - 1 {
			f[fmt.Sprintf("fixed%02d", k)] = fmt.Sprint(round)
		}
		f[fmt.Sprintf("key%04d", round)] = fmt.Sprint(round)
		return f
	}
	if _, err := vol.Write(payload(files(0))); err != nil {
		t.Fatal(err)
	}
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
		w.settle = time.Hour
	})
	for round := 1; round <= rounds; round++ {
		want := files(round)
		done := make(chan error, 1)
		go func() {
			_, err := vol.Write(payload(want))
			done <- err
		}()
		select {
		case c := <-h.w.Changes():
			// Checked at once, while the kubelet may still be at work.
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("key%04d", round))); err != nil {
				missed++
			}
			if c.Dir != dir || c.Hash != plainHash(t, want) {
				wrong++
			}
		case <-time.After(timeout):
			t.Fatalf("round %d: no Change within %s", round, timeout)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	h.quiet(t) // no second Change for any round
	return missed, wrong
}

// TestBrokenStates checks that a volume in a broken or partial state is
// never reported, that a warning says so once, and that coming back to
// the content already reported is no Change.
func TestBrokenStates(t *testing.T) {
	t.Run("dangling ..data", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "config")
		writeVolume(t, dir, baseFiles)
		h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
		data := filepath.Join(dir, "..data")
		version, err := os.Readlink(data)
		if err != nil {
			t.Fatal(err)
		}
		relink(t, "..gone", data)
		h.quiet(t)
		if n := strings.Count(h.logs.String(), "..data names no directory"); n != 1 {
			t.Errorf("dangling ..data logged %d times, want once:\n%s", n, h.logs)
		}
		relink(t, version, data)
		h.quiet(t) // back to the content already reported
		if !strings.Contains(h.logs.String(), "volume complete again") {
			t.Errorf("recovery not logged:\n%s", h.logs)
		}
	})
	t.Run("every visible entry dangles", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		outside := filepath.Join(t.TempDir(), "outside")
		writeTree(t, outside, baseFiles)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		symlink(t, filepath.Join(outside, "app.properties"), filepath.Join(dir, "app.properties"))
		symlink(t, filepath.Join(outside, "conf.d"), filepath.Join(dir, "conf.d"))
		// Nothing watched shows the targets coming back: a broken volume
		// is re-checked on every poll tick, and only then is there one.
		h := start(t, Options{Dirs: []string{dir}, PollInterval: 20 * time.Millisecond}, nil)
		if h.w.ticking.Load() {
			t.Error("the poll ticker runs while no volume needs it")
		}
		moved := outside + ".moved"
		if err := os.Rename(outside, moved); err != nil {
			t.Fatal(err)
		}
		h.quiet(t)
		waitFor(t, "poll ticker running", h.w.ticking.Load)
		if n := strings.Count(h.logs.String(), "every visible entry dangles"); n != 1 {
			t.Errorf("all-dangling logged %d times, want once:\n%s", n, h.logs)
		}
		if err := os.Rename(moved, outside); err != nil {
			t.Fatal(err)
		}
		h.quiet(t)
		waitFor(t, "poll ticker stopped", func() bool { return !h.w.ticking.Load() })
		h.quiet(t) // whole again, with the content already reported
		writeTree(t, outside, map[string]string{"app.properties": "changed"})
		h.eventually(t, dir, mustHash(t, dir))
	})
	t.Run("rm -rf step by step", func(t *testing.T) {
		base := t.TempDir()
		dir := filepath.Join(base, "config")
		writeVolume(t, dir, baseFiles)
		h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
			w.settle = time.Hour
		})
		version, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		// The order rm -rf may take: every state in between is partial.
		for _, p := range []string{
			filepath.Join(version, "conf.d", "tls", "key.pem"),
			filepath.Join(version, "conf.d", "tls"),
			"app.properties",
			filepath.Join(version, "conf.d", "default.conf"),
			"..data",
			filepath.Join(version, "conf.d"),
			filepath.Join(version, "app.properties"),
			version,
			"conf.d",
			"",
		} {
			if err := os.Remove(filepath.Join(dir, p)); err != nil {
				t.Fatal(err)
			}
			h.quiet(t)
		}
		staging := filepath.Join(base, "staging")
		writeVolume(t, staging, baseFiles)
		if err := os.Rename(staging, dir); err != nil {
			t.Fatal(err)
		}
		h.waitMetric(t, "watched", 2)
		h.quiet(t) // back with identical content
		writeVolume(t, dir, map[string]string{"v": "2"})
		h.expect(t, dir, mustHash(t, dir))
		h.quiet(t)
	})
	t.Run("rm -rf and back", func(t *testing.T) {
		base := t.TempDir()
		dir := filepath.Join(base, "config")
		writeVolume(t, dir, baseFiles)
		h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
		for range 20 {
			// At once, as a script that recreates the volume would.
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			writeVolume(t, dir, baseFiles)
			h.waitMetric(t, "watched", 2)
			h.quiet(t)
		}
	})
	t.Run("plain directory emptied is a change", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		writeTree(t, dir, map[string]string{"a": "1", "b": "2"})
		h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
		for _, n := range []string{"a", "b"} {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		h.eventually(t, dir, emptyHash)
		h.quiet(t)
	})
}

// relink points the symlink link at target in one step.
func relink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	symlink(t, target, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// plainHash is the hash of a plain directory holding files.
func plainHash(t testing.TB, files map[string]string) [32]byte {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	return mustHash(t, dir)
}

// TestBusyVolume rewrites a file of a plain directory without a pause: the
// watcher, which waits for a hash that no event made stale, must still
// report the volume while it keeps changing (at the settle bound), and
// without warnings: busy is not broken.
func TestBusyVolume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	writeTree(t, dir, baseFiles)
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
		w.settle = 50 * time.Millisecond
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	var once sync.Once
	halt := func() {
		once.Do(func() { close(stop) })
		<-done
	}
	t.Cleanup(halt) // registered after TempDir's cleanup: runs before it
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.WriteFile(filepath.Join(dir, "busy.log"), []byte(strings.Repeat("x", i%4096)), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Reported while it has been busy for 4 settle bounds already.
	busySince := time.Now()
	deadline := time.After(timeout)
	var last [32]byte
	for seen := false; !seen; {
		select {
		case c := <-h.w.Changes():
			if c.Dir != dir {
				t.Fatalf("Change for %s", c.Dir)
			}
			last = c.Hash
			seen = c.Time.Sub(busySince) > 4*h.w.settle
		case <-deadline:
			t.Fatal("a volume that keeps changing was not reported while busy")
		}
	}
	halt()
	if final := mustHash(t, dir); final != last {
		h.eventually(t, dir, final)
	}
	h.quiet(t)
	if strings.Contains(h.logs.String(), "level=warn") {
		t.Errorf("warnings for a busy volume:\n%s", h.logs)
	}
}
