package watcher

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// timeout bounds every wait for something that must happen.
const timeout = 5 * time.Second

// harness runs a Watcher for one test. Every harness watches a marker
// directory as its last volume: writing to it and waiting for its Change,
// then for the watcher to be idle, is a sync point. inotify delivers events
// in order, so once the marker's Change has arrived every earlier event has
// marked its volume dirty; once the watcher is idle (no volume dirty or
// being re-hashed) every such volume has been re-hashed, and any Change it
// made is in the channel. On a poll or resync tick every volume is marked
// at the same tick as the marker.
type harness struct {
	w       *Watcher
	reg     *prometheus.Registry
	logs    *binary.Buffer
	marker  string
	markers int // Changes caused by markers
}

func start(t testing.TB, opts Options, setup func(w *Watcher)) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), logs: &binary.Buffer{}, marker: t.TempDir()}
	opts.Dirs = append(opts.Dirs, h.marker)
	w, err := New(log.NewLogfmtLogger(h.logs), h.reg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if setup != nil {
		setup(w)
	}
	h.w = w
	if w.Ready() == nil {
		t.Error("Ready before Run")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(timeout):
			t.Error("Run did not return within 5s of cancel")
		}
	})
	waitFor(t, "Ready", func() bool { return w.Ready() == nil })
	return h
}

// waitFor polls cond until it holds, failing after timeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, timeout, cond, "%s not reached", what)
}

// expect waits for the next Change, which must be for dir with hash want.
func (h *harness) expect(t testing.TB, dir string, want [32]byte) Change {
	t.Helper()
	select {
	case c := <-h.w.Changes():
		if c.Dir != dir || c.Hash != want {
			t.Fatalf("got Change{%s %x}, want Change{%s %x}", c.Dir, c.Hash[:6], dir, want[:6])
		}
		if c.Time.IsZero() {
			t.Error("Change.Time is zero")
		}
		return c
	case <-time.After(timeout):
		t.Fatalf("no Change for %s within %s", dir, timeout)
	}
	return Change{}
}

// eventually waits for a Change for dir with hash want, accepting earlier
// Changes for dir: a writer that is not atomic (truncate, then write) may
// legitimately be seen half-way. Changes for other dirs fail the test.
func (h *harness) eventually(t testing.TB, dir string, want [32]byte) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case c := <-h.w.Changes():
			if c.Dir != dir {
				t.Fatalf("unexpected Change for %s while waiting for %s", c.Dir, dir)
			}
			if c.Hash == want {
				return
			}
		case <-deadline:
			t.Fatalf("no Change to %x for %s within %s", want[:6], dir, timeout)
		}
	}
}

// quiet fails if the watcher sends any Change, other than the marker's,
// for what happened so far. It writes the marker twice: two rounds, because
// on a poll or resync tick the volume under test may have been hashed just
// before the noise while the marker was hashed just after it; the tick that
// sees the second marker comes after the noise.
func (h *harness) quiet(t testing.TB) {
	t.Helper()
	for range 2 {
		h.markers++
		writeAtomic(t, filepath.Join(h.marker, "marker"), fmt.Sprint(h.markers))
		h.expect(t, h.marker, mustHash(t, h.marker))
		deadline := time.Now().Add(timeout)
		for !h.w.idle() {
			select {
			case c := <-h.w.Changes():
				t.Fatalf("unexpected Change{%s %x}", c.Dir, c.Hash[:6])
			case <-time.After(time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("watcher not idle within %s", timeout)
			}
		}
	}
	select {
	case c := <-h.w.Changes():
		t.Fatalf("unexpected Change{%s %x}", c.Dir, c.Hash[:6])
	default:
	}
}

// writeAtomic replaces the file name in one step, as a careful writer does:
// written beside it, then renamed over it.
func writeAtomic(t testing.TB, name, data string) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(filepath.Dir(name)), "tmp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) metric(name string) float64 {
	switch name {
	case "changes":
		return testutil.ToFloat64(h.w.changesTotal)
	case "events":
		return testutil.ToFloat64(h.w.eventsTotal)
	case "errors":
		return testutil.ToFloat64(h.w.errorsTotal)
	case "watched":
		return testutil.ToFloat64(h.w.watchedDirs)
	case "hashes":
		return testutil.ToFloat64(h.w.hashesTotal)
	}
	panic("unknown metric " + name)
}

func (h *harness) waitMetric(t testing.TB, name string, want float64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s == %v", name, want), func() bool { return h.metric(name) == want })
}

func payload(files map[string]string) map[string]kubelet.File {
	p := make(map[string]kubelet.File, len(files))
	for k, v := range files {
		p[k] = kubelet.File{Data: []byte(v)}
	}
	return p
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "app.conf")
	writeTree(t, dir, map[string]string{"app.conf": "x"})
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no dir", Options{}, "option Dirs: at least one directory is required"},
		{"empty dir", Options{Dirs: []string{""}}, `option Dirs "": must not be empty`},
		{"file", Options{Dirs: []string{dir, file}}, `option Dirs "` + file + `": is a file, not a directory: ` + subPathHint},
		{"negative resync", Options{Dirs: []string{dir}, ResyncInterval: -time.Second}, "option ResyncInterval -1s: must not be negative"},
		{"negative poll", Options{Dirs: []string{dir}, PollInterval: -time.Second}, "option PollInterval -1s: must not be negative"},
		{"existing dir", Options{Dirs: []string{dir}}, ""},
		{"missing dir", Options{Dirs: []string{filepath.Join(dir, "not", "yet")}}, ""},
		{"nil registry", Options{Dirs: []string{dir, dir + "/"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reg prometheus.Registerer = prometheus.NewRegistry()
			if tt.name == "nil registry" {
				reg = nil
			}
			w, err := New(nil, reg, tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if w.Changes() == nil {
					t.Error("Changes() is nil")
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v", tt.opts)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("error = %q, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(nil, reg, Options{Dirs: []string{t.TempDir()}}); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg,
		"hotreload_changes_total",
		"hotreload_watch_events_total",
		"hotreload_watch_errors_total",
		"hotreload_volume_hashes_total",
		"hotreload_watched_dirs",
	)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("found %d of the 5 metrics", n)
	}
}

func TestRunTwice(t *testing.T) {
	h := start(t, Options{}, nil)
	if err := h.w.Run(context.Background()); err == nil {
		t.Error("a second Run returned nil")
	}
}

// TestKubeletUpdates drives one volume through a sequence of kubelet
// updates: each real update gives exactly one Change with the final hash,
// and the others give none.
func TestKubeletUpdates(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts Options
	}{
		{"inotify", Options{PollInterval: time.Hour}},
		{"poll", Options{Poll: true, PollInterval: 10 * time.Millisecond}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "config")
			vol := kubelet.New(dir)
			if _, err := vol.Write(payload(baseFiles)); err != nil {
				t.Fatal(err)
			}
			opts := mode.opts
			opts.Dirs = []string{dir}
			h := start(t, opts, nil)
			h.quiet(t) // no Change at start

			steps := []struct {
				name  string
				files map[string]string // nil: Chmod
				want  bool
			}{
				{"content change", map[string]string{"app.properties": "color=green\n", "conf.d/default.conf": "listen 80;\n", "conf.d/tls/key.pem": "-----BEGIN-----\n"}, true},
				{"identical rewrite", map[string]string{"app.properties": "color=green\n", "conf.d/default.conf": "listen 80;\n", "conf.d/tls/key.pem": "-----BEGIN-----\n"}, false},
				{"chmod noise", nil, false},
				{"nested change", map[string]string{"app.properties": "color=green\n", "conf.d/default.conf": "listen 8080;\n", "conf.d/tls/key.pem": "-----BEGIN-----\n"}, true},
				{"new keys", map[string]string{"app.properties": "color=green\n", "conf.d/default.conf": "listen 8080;\n", "conf.d/tls/key.pem": "-----BEGIN-----\n", "new.txt": "n", "a/b/c.txt": "c"}, true},
				{"vanished top-level key", map[string]string{"app.properties": "color=green\n", "conf.d/default.conf": "listen 8080;\n", "conf.d/tls/key.pem": "-----BEGIN-----\n", "a/b/c.txt": "c"}, true},
				{"vanished nested key", map[string]string{"app.properties": "color=green\n", "conf.d/default.conf": "listen 8080;\n", "a/b/c.txt": "c"}, true},
				{"chmod noise again", nil, false},
				{"back to the start", baseFiles, true},
			}
			wantChanges := 0
			for _, s := range steps {
				t.Run(s.name, func(t *testing.T) {
					if s.files == nil {
						if err := vol.Chmod(); err != nil {
							t.Fatal(err)
						}
					} else if _, err := vol.Write(payload(s.files)); err != nil {
						t.Fatal(err)
					}
					if s.want {
						wantChanges++
						h.expect(t, dir, mustHash(t, dir))
					}
					h.quiet(t) // and nothing more
				})
			}
			if got, want := h.metric("changes"), float64(wantChanges+h.markers); got != want {
				t.Errorf("hotreload_changes_total = %v, want %v", got, want)
			}
			if got := h.metric("watched"); got != 2 {
				t.Errorf("hotreload_watched_dirs = %v, want 2", got)
			}
			if got := h.metric("errors"); got != 0 {
				t.Errorf("hotreload_watch_errors_total = %v, want 0", got)
			}
			events := h.metric("events")
			if mode.name == "inotify" && events == 0 {
				t.Error("hotreload_watch_events_total = 0 with inotify")
			}
			if mode.name == "poll" && events != 0 {
				t.Errorf("hotreload_watch_events_total = %v while polling", events)
			}
		})
	}
}

// TestHashesPerUpdate counts the walks of a kubelet volume of flat keys:
// one at start, since its root and version directory are watched before
// they are read, and one per update, or two when the walk started by the
// creation of the new version directory sees a later event of the same
// update. A walk that ran before the watches existed would be redone.
// (TestLateMarks checks which later events do not make a walk stale.)
func TestHashesPerUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	vol := kubelet.New(dir)
	files := map[string]string{"a.conf": "a", "b.conf": "b", "c.conf": "c"}
	if _, err := vol.Write(payload(files)); err != nil {
		t.Fatal(err)
	}
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
	// The volume and the harness's marker directory, once each.
	if got := h.metric("hashes"); got != 2 {
		t.Errorf("hotreload_volume_hashes_total = %v at start, want 2 (one per directory)", got)
	}
	const updates = 20
	for i := range updates {
		files["a.conf"] = fmt.Sprint(i)
		if _, err := vol.Write(payload(files)); err != nil {
			t.Fatal(err)
		}
		h.expect(t, dir, mustHash(t, dir))
	}
	waitFor(t, "the volume idle", h.w.idle)
	if got, most := h.metric("hashes"), float64(2+2*updates); got > most {
		t.Errorf("hotreload_volume_hashes_total = %v after %d updates, want at most %v", got, updates, most)
	}
}

// TestInitial checks what Initial returns: the first hash of every
// directory whole at start, none for one missing or broken; and that a
// change right after it is sent on Changes.
func TestInitial(t *testing.T) {
	base := t.TempDir()
	whole := filepath.Join(base, "whole")
	vol := kubelet.New(whole)
	if _, err := vol.Write(payload(map[string]string{"a.conf": "a"})); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(base, "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(plain, "b.conf"), "b")
	broken := filepath.Join(base, "broken")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2020_01_01_00_00_00.1", filepath.Join(broken, "..data")); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")
	h := start(t, Options{Dirs: []string{whole, plain, broken, missing}, PollInterval: time.Hour}, nil)

	got, err := h.w.Initial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][32]byte{whole: mustHash(t, whole), plain: mustHash(t, plain), h.marker: mustHash(t, h.marker)}
	if !maps.Equal(got, want) {
		t.Errorf("Initial = %d directories %v, want %v (not %s nor %s)", len(got), slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)), broken, missing)
	}
	got[whole] = [32]byte{} // a copy: the caller may change it
	if again, _ := h.w.Initial(context.Background()); again[whole] != want[whole] {
		t.Error("Initial returned the watcher's own map")
	}

	if _, err := vol.Write(payload(map[string]string{"a.conf": "a2"})); err != nil {
		t.Fatal(err)
	}
	if c := h.expect(t, whole, mustHash(t, whole)); c.Hash == want[whole] {
		t.Error("the Change after Initial has Initial's hash")
	}
}

// TestPlainDir checks plain directories, written without the kubelet.
// PollInterval is an hour, so only inotify can see these changes.
func TestPlainDir(t *testing.T) {
	tests := []struct {
		name string
		op   func(t *testing.T, dir string)
	}{
		{"create file", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{"new.conf": "new"})
		}},
		{"rewrite in place", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{"app.properties": "color=green\n"})
		}},
		{"append in place", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, "conf.d", "default.conf"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("gzip on;\n"); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename into place", func(t *testing.T, dir string) {
			tmp := filepath.Join(filepath.Dir(dir), "staging")
			writeTree(t, tmp, map[string]string{"app.properties": "color=red\n"})
			if err := os.Rename(filepath.Join(tmp, "app.properties"), filepath.Join(dir, "app.properties")); err != nil {
				t.Fatal(err)
			}
		}},
		{"remove file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "app.properties")); err != nil {
				t.Fatal(err)
			}
		}},
		{"remove subdirectory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "conf.d", "tls")); err != nil {
				t.Fatal(err)
			}
		}},
		{"nested file rewritten", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{"conf.d/tls/key.pem": "-----OTHER-----\n"})
		}},
		{"symlink swapped to another directory", func(t *testing.T, dir string) {
			other := filepath.Join(filepath.Dir(dir), "other")
			writeTree(t, other, map[string]string{"x": "y"})
			symlink(t, other, filepath.Join(dir, "tmp-link"))
			if err := os.RemoveAll(filepath.Join(dir, "conf.d")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "tmp-link"), filepath.Join(dir, "conf.d")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			writeTree(t, dir, baseFiles)
			h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
			tt.op(t, dir)
			h.eventually(t, dir, mustHash(t, dir))
			h.quiet(t)
		})
	}
}

// TestPlainDirNewSubdirectories checks that directories created after the
// start are watched: a file written into them later is seen without any
// resync or polling.
func TestPlainDirNewSubdirectories(t *testing.T) {
	tests := []struct {
		name string
		sub  string
	}{
		{"one level", "new"},
		{"several levels at once", "new/deeper/deepest"},
		{"inside an existing subdirectory", "conf.d/tls/more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			writeTree(t, dir, baseFiles)
			h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)

			// Created and filled at once: the watch may come late, the
			// re-hash after adding it must still see the file.
			writeTree(t, dir, map[string]string{tt.sub + "/a.conf": "a"})
			h.eventually(t, dir, mustHash(t, dir))
			h.quiet(t)

			// Written into later: only a watch on the new directory sees it.
			writeTree(t, dir, map[string]string{tt.sub + "/b.conf": "b"})
			h.eventually(t, dir, mustHash(t, dir))
			writeTree(t, dir, map[string]string{tt.sub + "/a.conf": "changed"})
			h.eventually(t, dir, mustHash(t, dir))
		})
	}
}

// TestLinkedDirectory checks that a directory outside the volume, reached
// through a symlink, is watched too.
func TestLinkedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	outside := filepath.Join(t.TempDir(), "shared")
	writeTree(t, dir, baseFiles)
	writeTree(t, outside, map[string]string{"shared.conf": "1", "file.conf": "f"})
	symlink(t, outside, filepath.Join(dir, "shared"))
	symlink(t, filepath.Join(outside, "file.conf"), filepath.Join(dir, "file.conf"))
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)

	writeTree(t, outside, map[string]string{"shared.conf": "2"})
	h.eventually(t, dir, mustHash(t, dir))
	writeTree(t, outside, map[string]string{"file.conf": "g"})
	h.eventually(t, dir, mustHash(t, dir))
	h.quiet(t)
}

func TestNoChangeAtStart(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	writeVolume(t, a, baseFiles)
	writeTree(t, b, baseFiles)
	h := start(t, Options{Dirs: []string{a, b}}, nil)
	h.quiet(t)
	if got := h.metric("watched"); got != 3 {
		t.Errorf("hotreload_watched_dirs = %v, want 3", got)
	}
	if got := h.metric("changes"); got != float64(h.markers) {
		t.Errorf("hotreload_changes_total = %v, want %v (the markers only)", got, h.markers)
	}
}

func TestChangeDirAsGiven(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	writeTree(t, dir, baseFiles)
	given := dir + "/./"
	h := start(t, Options{Dirs: []string{given, dir}}, nil)
	if got := h.metric("watched"); got != 2 {
		t.Errorf("hotreload_watched_dirs = %v, want 2: a dir given twice is watched once", got)
	}
	writeAtomic(t, filepath.Join(dir, "x"), "1")
	h.expect(t, given, mustHash(t, dir))
	h.quiet(t)
}

// TestLateVolume starts with a volume that does not exist yet.
func TestLateVolume(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		missing string // relative to a temp dir; the path watched
		create  func(t *testing.T, dir string)
		change  bool
	}{
		{
			name:    "kubelet volume, inotify on the parent",
			opts:    Options{PollInterval: time.Hour},
			missing: "config",
			create:  func(t *testing.T, dir string) { writeVolume(t, dir, baseFiles) },
			change:  true,
		},
		{
			name:    "plain directory several levels down, inotify on the parents",
			opts:    Options{PollInterval: time.Hour},
			missing: "a/b/c",
			create:  func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			change:  true,
		},
		{
			name:    "kubelet volume, polling",
			opts:    Options{Poll: true, PollInterval: 10 * time.Millisecond},
			missing: "config",
			create:  func(t *testing.T, dir string) { writeVolume(t, dir, baseFiles) },
			change:  true,
		},
		{
			name:    "empty directory is no change",
			opts:    Options{PollInterval: time.Hour},
			missing: "config",
			create: func(t *testing.T, dir string) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			change: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.FromSlash(tt.missing))
			opts := tt.opts
			opts.Dirs = []string{dir}
			h := start(t, opts, nil) // Ready although dir is missing
			if got := h.metric("watched"); got != 1 {
				t.Errorf("hotreload_watched_dirs = %v, want 1 (the marker only)", got)
			}
			h.quiet(t)

			tt.create(t, dir)
			if tt.change {
				h.eventually(t, dir, mustHash(t, dir))
			}
			h.waitMetric(t, "watched", 2)
			h.quiet(t)

			// Watched from now on.
			writeTree(t, dir, map[string]string{"later.txt": "x"})
			h.eventually(t, dir, mustHash(t, dir))

			if n := strings.Count(h.logs.String(), "volume does not exist yet, waiting for it"); n != 1 {
				t.Errorf("waiting logged %d times, want once:\n%s", n, h.logs)
			}
			if got := h.metric("errors"); got != 0 {
				t.Errorf("hotreload_watch_errors_total = %v, want 0: a missing dir is no error", got)
			}
		})
	}
}

// TestRecreatedVolume deletes a watched volume and creates it again.
func TestRecreatedVolume(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts Options
	}{
		{"inotify", Options{PollInterval: time.Hour}},
		{"poll", Options{Poll: true, PollInterval: 10 * time.Millisecond}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "config")
			writeVolume(t, dir, baseFiles)
			opts := mode.opts
			opts.Dirs = []string{dir}
			h := start(t, opts, nil)

			remove := func(t *testing.T) {
				t.Helper()
				// Moved away first, so that no hash sees it half-deleted.
				gone := filepath.Join(base, "gone")
				if err := os.Rename(dir, gone); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(gone); err != nil {
					t.Fatal(err)
				}
				h.waitMetric(t, "watched", 1)
				h.quiet(t) // a missing dir is not a change
			}
			recreate := func(t *testing.T, files map[string]string) {
				t.Helper()
				staging := filepath.Join(base, "staging")
				writeVolume(t, staging, files)
				if err := os.Rename(staging, dir); err != nil {
					t.Fatal(err)
				}
			}

			t.Run("re-created identical", func(t *testing.T) {
				remove(t)
				recreate(t, baseFiles)
				h.waitMetric(t, "watched", 2)
				h.quiet(t)
			})
			t.Run("watched again", func(t *testing.T) {
				if _, err := kubelet.New(dir).Write(payload(map[string]string{"v": "2"})); err != nil {
					t.Fatal(err)
				}
				h.expect(t, dir, mustHash(t, dir))
				h.quiet(t)
			})
			t.Run("re-created different", func(t *testing.T) {
				remove(t)
				recreate(t, map[string]string{"v": "3"})
				h.expect(t, dir, mustHash(t, dir))
				h.quiet(t)
			})
			if n := strings.Count(h.logs.String(), "volume removed, waiting for it"); n != 2 {
				t.Errorf("removal logged %d times, want 2:\n%s", n, h.logs)
			}
		})
	}
}

// noWatch makes the watcher believe it watches the paths under dir while
// inotify reports nothing for them: changes there are missed events.
func noWatch(dir string) func(w *Watcher) {
	return func(w *Watcher) {
		fake := -1
		w.addWatch = func(in *inotify, path string) (int, error) {
			if strings.HasPrefix(path, dir) {
				fake-- // a descriptor inotify never gives (-1 is its overflow's)
				return fake, nil
			}
			return in.add(path)
		}
	}
}

func TestOverflow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	writeVolume(t, dir, baseFiles)
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, noWatch(dir))
	if _, err := kubelet.New(dir).Write(payload(map[string]string{"v": "2"})); err != nil {
		t.Fatal(err)
	}
	h.quiet(t)                               // missed, as designed
	h.w.event(event{wd: -1, overflow: true}) // as inotify reports it
	h.expect(t, dir, mustHash(t, dir))
	if got := h.metric("errors"); got != 1 {
		t.Errorf("hotreload_watch_errors_total = %v, want 1", got)
	}
}

func TestResync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	vol := kubelet.New(dir)
	if _, err := vol.Write(payload(baseFiles)); err != nil {
		t.Fatal(err)
	}
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour, ResyncInterval: 10 * time.Millisecond}, noWatch(dir))
	h.quiet(t) // resyncs of unchanged content send nothing
	if _, err := vol.Write(payload(map[string]string{"v": "2"})); err != nil {
		t.Fatal(err)
	}
	h.expect(t, dir, mustHash(t, dir))
	if err := vol.Chmod(); err != nil {
		t.Fatal(err)
	}
	h.quiet(t)
}

func TestUnreadableFile(t *testing.T) {
	t.Run("simulated", func(t *testing.T) {
		// Root reads everything, so the permission error is injected.
		dir := filepath.Join(t.TempDir(), "vol")
		writeTree(t, dir, baseFiles)
		secret := filepath.Join(dir, "conf.d", "tls", "key.pem")
		var mu sync.Mutex
		denied := true
		h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, func(w *Watcher) {
			w.hasher.open = func(name string) (*os.File, error) {
				mu.Lock()
				defer mu.Unlock()
				if denied && name == secret {
					return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
				}
				return openRegular(name)
			}
		})
		testUnreadable(t, h, dir, secret, func() {
			mu.Lock()
			denied = false
			mu.Unlock()
		})
	})
	t.Run("chmod 000", func(t *testing.T) {
		if e2etest.AsUnprivileged(t) {
			return // root reads files of any mode: it ran as uid 65534
		}
		dir := filepath.Join(t.TempDir(), "vol")
		writeTree(t, dir, baseFiles)
		secret := filepath.Join(dir, "conf.d", "tls", "key.pem")
		if err := os.Chmod(secret, 0); err != nil {
			t.Fatal(err)
		}
		h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour}, nil)
		testUnreadable(t, h, dir, secret, func() {})
	})
}

// testUnreadable expects secret to be unreadable at start; allow makes it
// readable by the watcher's rules, then a chmod makes it so on disk.
func testUnreadable(t *testing.T, h *harness, dir, secret string, allow func()) {
	t.Helper()
	if got := h.metric("errors"); got != 1 {
		t.Errorf("hotreload_watch_errors_total = %v, want 1 at start", got)
	}
	// Noise: re-hashes that meet the same unreadable file again.
	for range 3 {
		if err := os.Chmod(filepath.Join(dir, "app.properties"), 0o640); err != nil {
			t.Fatal(err)
		}
		h.quiet(t)
	}
	if got := h.metric("errors"); got != 1 {
		t.Errorf("hotreload_watch_errors_total = %v, want 1: counted once, not on every re-hash", got)
	}
	if n := strings.Count(h.logs.String(), "cannot read file, watching its size, modification time and inode instead of its content; to fix, set the pod's fsGroup"); n != 1 {
		t.Errorf("unreadable file logged %d times, want once:\n%s", n, h.logs)
	}
	if !strings.Contains(h.logs.String(), "path=conf.d/tls/key.pem") {
		t.Errorf("log does not name the file:\n%s", h.logs)
	}
	allow()
	if err := os.Chmod(secret, 0o644); err != nil {
		t.Fatal(err)
	}
	h.expect(t, dir, mustHash(t, dir)) // becoming readable is a change
	h.quiet(t)
}

func TestSymlinkLoop(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	writeTree(t, dir, baseFiles)
	symlink(t, "..", filepath.Join(dir, "conf.d", "up"))
	symlink(t, "b", filepath.Join(dir, "a"))
	symlink(t, "a", filepath.Join(dir, "b"))
	h := start(t, Options{Dirs: []string{dir}, PollInterval: time.Hour, ResyncInterval: 10 * time.Millisecond}, nil)
	h.quiet(t) // several resyncs meet the loops again
	if got := h.metric("errors"); got != 3 {
		t.Errorf("hotreload_watch_errors_total = %v, want 3 (one per loop path)", got)
	}
	if n := strings.Count(h.logs.String(), "cannot hash entry"); n != 3 {
		t.Errorf("loops logged %d times, want 3:\n%s", n, h.logs)
	}
	writeTree(t, dir, map[string]string{"app.properties": "still works"})
	h.eventually(t, dir, mustHash(t, dir))
}

// TestVolumeBecomesFile checks a volume path that turns into a file: it is
// logged and waited for, never fatal.
func TestVolumeBecomesFile(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "vol")
	h := start(t, Options{Dirs: []string{dir}, PollInterval: 10 * time.Millisecond}, nil)
	writeTree(t, base, map[string]string{"vol": "a file"})
	waitFor(t, "warning logged", func() bool { return strings.Contains(h.logs.String(), "a subPath mount never updates") })
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"x": "y"})
	h.eventually(t, dir, mustHash(t, dir))
}
