package reloader

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/watcher"
)

// hashOf is the content numbered v, as harness.changeTo sends it.
func hashOf(v int) [32]byte {
	var sum [32]byte
	sum[0], sum[1] = byte(v), byte(v>>8)
	return sum
}

// startWith runs a Reloader with a logger into buf.
func startWith(t *testing.T, buf *binary.Buffer, targets []notifier.Target, opts Options) *harness {
	h := &harness{changes: make(chan watcher.Change), reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel)
	r := New(logfmt(buf), h.reg, targets, opts)
	go func() { h.done <- r.Run(ctx, h.changes) }()
	return h
}

func initial(c map[string][32]byte) func(context.Context) (map[string][32]byte, error) {
	return func(context.Context) (map[string][32]byte, error) { return c, nil }
}

// TestComparedWithDelivered: a burst is compared with the content the target
// was last given, not with the content of the last reload that was tried.
func TestComparedWithDelivered(t *testing.T) {
	t.Run("a failed change reverted to the delivered content is dropped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rejected := errors.New("status 500: invalid config")
			f := &fakeTarget{name: "app"}
			h := start(t, []notifier.Target{f}, Options{Backoff: fixedBackoff(10 * time.Second)})
			h.changeTo("/etc/a", 1) // delivered
			synctest.Wait()
			f.mu.Lock()
			f.errs = []error{rejected, rejected, rejected}
			f.mu.Unlock()
			h.changeTo("/etc/a", 2) // rejected, retried in 10s
			time.Sleep(time.Second)
			h.changeTo("/etc/a", 1) // reverted to what the app has
			time.Sleep(time.Minute)
			synctest.Wait()
			if got := len(f.times()); got != 2 {
				t.Errorf("requests = %d, want 2: content back to the delivered one is not sent again, and the failed one is not retried", got)
			}
			if got := series(h, "hotreload_last_reload_successful", "app"); got != 1 {
				t.Errorf("last_reload_successful = %v, want 1: the app has the content asked for", got)
			}
			h.stop(t)
		})
	})
	t.Run("a failed change that stays is re-sent after a burst that ends on it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rejected := errors.New("status 500: invalid config")
			f := &fakeTarget{name: "app"}
			h := start(t, []notifier.Target{f}, Options{Retries: 1, Debounce: 100 * time.Millisecond})
			h.changeTo("/etc/a", 1) // delivered
			time.Sleep(time.Second)
			f.mu.Lock()
			f.errs = []error{rejected}
			f.mu.Unlock()
			h.changeTo("/etc/a", 2) // rejected, no attempts left
			time.Sleep(time.Second)
			h.changeTo("/etc/a", 3) // a burst that ends on 2 again
			h.changeTo("/etc/a", 2)
			time.Sleep(time.Second)
			synctest.Wait()
			if got := len(f.times()); got != 3 {
				t.Errorf("requests = %d, want 3: content 2 was never delivered, so a burst ending on it reloads", got)
			}
			if got := series(h, "hotreload_last_reload_successful", "app"); got != 1 {
				t.Errorf("last_reload_successful = %v, want 1", got)
			}
			h.stop(t)
		})
	})
	t.Run("each target is compared with what it was given", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ok := &fakeTarget{name: "ok"}
			flaky := &fakeTarget{name: "flaky"}
			h := start(t, []notifier.Target{ok, flaky}, Options{Retries: 1, Debounce: 100 * time.Millisecond})
			h.changeTo("/etc/a", 1)
			time.Sleep(time.Second)
			flaky.mu.Lock()
			flaky.errs = []error{errors.New("status 503")}
			flaky.mu.Unlock()
			h.changeTo("/etc/a", 2) // ok has 2; flaky failed and keeps 1
			time.Sleep(time.Second)
			h.changeTo("/etc/a", 3)
			h.changeTo("/etc/a", 2) // back to 2: only flaky lacks it
			time.Sleep(time.Second)
			synctest.Wait()
			if got := len(ok.times()); got != 2 {
				t.Errorf("ok target requests = %d, want 2", got)
			}
			if got := len(flaky.times()); got != 3 {
				t.Errorf("flaky target requests = %d, want 3", got)
			}
			h.stop(t)
		})
	})
}

// TestStartupContentIsDelivered: the content at start is what the app has,
// so the first burst that ends on it reloads nothing, like every later one.
func TestStartupContentIsDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{name: "app"}
		h := start(t, []notifier.Target{f}, Options{
			Debounce: 100 * time.Millisecond,
			Initial:  initial(map[string][32]byte{"/etc/a": hashOf(5), "/etc/b": hashOf(9)}),
		})
		h.changeTo("/etc/a", 6) // edited ...
		h.changeTo("/etc/a", 5) // ... and restored
		time.Sleep(time.Second)
		synctest.Wait()
		if got := len(f.times()); got != 0 {
			t.Errorf("reloads = %d, want 0: the burst ended on the startup content", got)
		}
		h.changeTo("/etc/b", 10)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := len(f.times()); got != 1 {
			t.Errorf("reloads = %d, want 1 after a real change", got)
		}
		h.stop(t)
	})
}

// TestChangedWhileStarting: a first change to the startup content itself
// means the watcher's first hash was older than Initial's: the content
// changed while starting, so it is delivered.
func TestChangedWhileStarting(t *testing.T) {
	for _, tt := range []struct {
		name  string
		state bool // a state file says the app has the startup content
		want  int
	}{
		{"no state file", false, 1},
		{"the state file knows", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			if tt.state {
				writeState(t, path, "/etc/a", map[string]int{"app": 5})
			}
			synctest.Test(t, func(t *testing.T) {
				sf, err := OpenStateFile(path)
				if err != nil {
					t.Fatal(err)
				}
				defer sf.Close()
				f := &fakeTarget{name: "app"}
				h := start(t, []notifier.Target{f}, Options{Initial: initial(map[string][32]byte{"/etc/a": hashOf(5)}), State: sf})
				h.changeTo("/etc/a", 5)
				synctest.Wait()
				if got := len(f.times()); got != tt.want {
					t.Errorf("reloads = %d, want %d", got, tt.want)
				}
				h.stop(t)
			})
		})
	}
}

func TestInitialError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(nil, prometheus.NewRegistry(), nil, Options{Initial: func(context.Context) (map[string][32]byte, error) {
			return nil, errors.New("boom")
		}})
		err := r.Run(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("Run = %v, want the error of Initial", err)
		}
	})
}

// writeState writes a state file of the first format, which kept the
// content hash, for targets, each with hash v for dir.
func writeState(t *testing.T, path, dir string, targets map[string]int) {
	t.Helper()
	var entries []string
	for name, v := range targets {
		h := hashOf(v)
		entries = append(entries, fmt.Sprintf(`%q:{"hash":"%x","delivered_at":"2026-11-23T07:00:00Z"}`, name, h[:]))
	}
	body := fmt.Sprintf(`{"version":1,"volumes":{%q:{%s}}}`, dir, strings.Join(entries, ","))
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readStateFile reads a state file of the current format: target -> dir ->
// entry.
func readStateFile(t *testing.T, path string) map[string]map[string]StateEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, legacy, err := decodeState(b)
	if err != nil || legacy {
		t.Fatalf("state file: %v, of the first format %v:\n%s", err, legacy, b)
	}
	return got.records
}

// valueOf is the content value of the content numbered v, without a key.
func valueOf(v int) string {
	h := hashOf(v)
	return hex.EncodeToString(h[:])
}

// TestStateFile: a change made while hotreload was not running is delivered
// at start; the first start of a pod records the startup content as
// delivered instead. What the file does not tell (a state file that cannot
// be read, a volume or target without a record) is delivered; records that
// match nothing now are dropped, with a line that says so.
func TestStateFile(t *testing.T) {
	const dir = "/etc/a"
	tests := []struct {
		name     string
		file     func(t *testing.T, path string) // prepares the file
		want     map[string]int                  // reloads at start, by target
		wantLog  string
		notInLog string
	}{
		{
			name:     "missing: first start of the pod, nothing to reload",
			file:     func(t *testing.T, path string) {},
			want:     map[string]int{"one": 0, "two": 0},
			wantLog:  `msg="no state file yet (first start of the pod): recording the startup content as delivered"`,
			notInLog: "level=warn",
		},
		{
			name: "empty: as missing",
			file: func(t *testing.T, path string) {
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want:     map[string]int{"one": 0, "two": 0},
			wantLog:  `msg="no state file yet (first start of the pod)`,
			notInLog: "level=warn",
		},
		{
			name:     "same content: nothing to reload",
			file:     func(t *testing.T, path string) { writeState(t, path, dir, map[string]int{"one": 5, "two": 5}) },
			want:     map[string]int{"one": 0, "two": 0},
			notInLog: "not running",
		},
		{
			name:    "changed while not running: reloaded once at start",
			file:    func(t *testing.T, path string) { writeState(t, path, dir, map[string]int{"one": 4, "two": 4}) },
			want:    map[string]int{"one": 1, "two": 1},
			wantLog: `msg="content changed while hotreload was not running, reloading" dirs=/etc/a`,
		},
		{
			name:    "only the target that lacks it is reloaded",
			file:    func(t *testing.T, path string) { writeState(t, path, dir, map[string]int{"one": 4, "two": 5}) },
			want:    map[string]int{"one": 1, "two": 0},
			wantLog: `msg="content changed while hotreload was not running, reloading" dirs=/etc/a`,
		},
		{
			name: "a volume under another path: its record dropped, the volume delivered",
			file: func(t *testing.T, path string) { writeState(t, path, "/etc/gone", map[string]int{"one": 4, "two": 4}) },
			want: map[string]int{"one": 1, "two": 1},
			wantLog: `msg="the state file has records of volumes not watched now (not configured, or missing), dropping them; one that appears is delivered" dirs=/etc/gone` + "\n" +
				`level=info component=reloader msg="the state file does not say what the app was given of these volumes (missing before, a target added since, a volume that may hold a Secret and no content key, or another key): delivering them" dirs=/etc/a`,
		},
		{
			name: "a target not configured now: its records dropped",
			file: func(t *testing.T, path string) {
				writeState(t, path, dir, map[string]int{"one": 5, "two": 5, "gone": 4})
			},
			want:    map[string]int{"one": 0, "two": 0},
			wantLog: `msg="the state file has records of targets not configured now, dropping them" targets=gone`,
		},
		{
			name:    "a target without a record: delivered",
			file:    func(t *testing.T, path string) { writeState(t, path, dir, map[string]int{"one": 5}) },
			want:    map[string]int{"one": 0, "two": 1},
			wantLog: `msg="the state file does not say what the app was given of these volumes (missing before, a target added since, a volume that may hold a Secret and no content key, or another key): delivering them" dirs=/etc/a`,
		},
		{
			name: "corrupt: one warning, the current content delivered",
			file: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte(`{"version":1,"volumes":{"/etc/a":{"one":{"hash":"zz`), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want:    map[string]int{"one": 1, "two": 1},
			wantLog: `level=warn component=reloader msg="cannot read the state file, so what the app has is not known: delivering the current content, and rewriting the file"`,
		},
		{
			name: "a bad hash: one warning, the current content delivered",
			file: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte(`{"version":1,"volumes":{"/etc/a":{"one":{"hash":"abc"}}}}`), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want:    map[string]int{"one": 1, "two": 1},
			wantLog: `hash \"abc\" is not 64 hex digits`,
		},
		{
			name: "too large: one warning, not read, the current content delivered",
			file: func(t *testing.T, path string) {
				big := `{"version":1,"volumes":{},"padding":"` + strings.Repeat("x", maxStateSize) + `"}`
				if err := os.WriteFile(path, []byte(big), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want:    map[string]int{"one": 1, "two": 1},
			wantLog: `err="larger than 1048576 bytes, more than hotreload writes"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			tt.file(t, path)
			synctest.Test(t, func(t *testing.T) {
				sf, err := OpenStateFile(path)
				if err != nil {
					t.Fatal(err)
				}
				defer sf.Close()
				var buf binary.Buffer
				one, two := &fakeTarget{name: "one"}, &fakeTarget{name: "two"}
				h := startWith(t, &buf, []notifier.Target{one, two}, Options{
					Initial: initial(map[string][32]byte{dir: hashOf(5)}),
					State:   sf,
				})
				time.Sleep(time.Second)
				synctest.Wait()
				for name, f := range map[string]*fakeTarget{"one": one, "two": two} {
					if got := len(f.times()); got != tt.want[name] {
						t.Errorf("target %s: reloads at start = %d, want %d", name, got, tt.want[name])
					}
				}
				h.stop(t)
				out := buf.String()
				if tt.wantLog != "" && !strings.Contains(out, tt.wantLog) {
					t.Errorf("log lacks %q; log:\n%s", tt.wantLog, out)
				}
				if tt.notInLog != "" && strings.Contains(out, tt.notInLog) {
					t.Errorf("log has %q; log:\n%s", tt.notInLog, out)
				}
				if n := strings.Count(out, "level=warn"); n > 1 {
					t.Errorf("warnings = %d, want at most 1; log:\n%s", n, out)
				}
			})
			// Afterwards the file says that both targets have the content.
			got := readStateFile(t, path)
			for _, name := range []string{"one", "two"} {
				if e, ok := got[name][dir]; !ok || e.Value != valueOf(5) {
					t.Errorf("state file after start: target %s has %v, want the startup content", name, got[name])
				}
			}
		})
	}
}

// TestStateFileFollowsDeliveries: the file records each delivery, and not a
// failed one, so that a restart re-sends what the app never got.
func TestStateFileFollowsDeliveries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	synctest.Test(t, func(t *testing.T) {
		sf, err := OpenStateFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer sf.Close()
		f := &fakeTarget{name: "app"}
		h := start(t, []notifier.Target{f}, Options{
			Retries: 1,
			Initial: initial(map[string][32]byte{"/etc/a": hashOf(1)}),
			State:   sf,
		})
		t0 := time.Now()
		h.changeTo("/etc/a", 2)
		synctest.Wait()
		got := readStateFile(t, path)["app"]["/etc/a"]
		if got.Value != valueOf(2) || !got.At.Equal(t0) {
			t.Errorf("after a delivery: %s at %v, want %s at %v", got.Value, got.At, valueOf(2), t0)
		}
		f.setFailAll(true)
		h.changeTo("/etc/a", 3)
		synctest.Wait()
		if got := readStateFile(t, path)["app"]["/etc/a"]; got.Value != valueOf(2) {
			t.Errorf("after a failed delivery: %s, want still %s", got.Value, valueOf(2))
		}
		h.stop(t)
	})
	// A restart that finds content 3 reloads it.
	synctest.Test(t, func(t *testing.T) {
		sf, err := OpenStateFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer sf.Close()
		f := &fakeTarget{name: "app"}
		h := start(t, []notifier.Target{f}, Options{Initial: initial(map[string][32]byte{"/etc/a": hashOf(3)}), State: sf})
		synctest.Wait()
		if got := len(f.times()); got != 1 {
			t.Errorf("reloads at restart = %d, want 1: content 3 was never delivered", got)
		}
		h.stop(t)
	})
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("state file: %v, %v; want mode 0644", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestOpenStateFile(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(tmp, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"directory missing", filepath.Join(tmp, "nope", "state.json"), "directory " + tmp + "/nope does not exist (mount an emptyDir there)"},
		{"parent is a file", filepath.Join(file, "state.json"), file + " is not a directory"},
		{"path is a directory", tmp, "is a directory, want a file name in it"},
		{"directory not writable", filepath.Join(ro, "state.json"), "cannot create a file in " + ro + ": permission denied"},
		{"fine", filepath.Join(tmp, "state.json"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "directory not writable" && e2etest.AsUnprivileged(t) {
				return // root writes anywhere: it ran as uid 65534
			}
			_, err := OpenStateFile(tt.path)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("OpenStateFile = %v, want no error", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("OpenStateFile = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestStateFileReplacesOnlyItsOwn: a --state-file that names something
// hotreload did not write (a device, a pipe, a link, the app's own config on
// a shared emptyDir) is refused, and left as it was.
func TestStateFileReplacesOnlyItsOwn(t *testing.T) {
	tmp := t.TempDir()
	appConf := filepath.Join(tmp, "app.conf")
	if err := os.WriteFile(appConf, []byte("listen 80;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(tmp, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(appConf, link); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(tmp, "state.json")
	writeState(t, ours, "/etc/a", map[string]int{"one": 1})
	for _, tt := range []struct{ name, path, want string }{
		{"another program's file", appConf, "exists and was not written by hotreload: refusing to replace it; give a file of its own, on an emptyDir"},
		{"a named pipe", fifo, "is a named pipe, not a file that hotreload wrote: refusing to replace it"},
		{"a symbolic link", link, "is a symbolic link, not a file that hotreload wrote: refusing to replace it"},
		{"a state file", ours, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sf, err := OpenStateFile(tt.path)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("OpenStateFile = %v", err)
				}
				sf.Close()
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("OpenStateFile = %v, want %q", err, tt.want)
			}
		})
	}
	if b, err := os.ReadFile(appConf); err != nil || string(b) != "listen 80;\n" {
		t.Errorf("app.conf = %q, %v; want it untouched", b, err)
	}
}

// TestStateFileLocked: two hotreloads never share a state file: the second
// is refused while the first holds it, and gets it once it is released.
func TestStateFileLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	first, err := OpenStateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenStateFile(path)
	want := "in use by another hotreload, which holds " + path + ".lock: give each hotreload a state file of its own"
	if err == nil || err.Error() != want {
		t.Errorf("second OpenStateFile = %v, want %q", err, want)
	}
	first.Close()
	second, err := OpenStateFile(path)
	if err != nil {
		t.Fatalf("OpenStateFile after the first let go: %v", err)
	}
	second.Close()
}

// TestStateFileCleansUp: the temporary files that a crash left beside the
// state file are removed at start, with a line that says so.
func TestStateFileCleansUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	left := []string{filepath.Join(dir, ".state.json.tmp-12345"), filepath.Join(dir, ".hotreload-state-check-678")}
	for _, name := range left {
		if err := os.WriteFile(name, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(dir, ".other.json.tmp-1")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sf, err := OpenStateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	for _, name := range left {
		if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it removed", name, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("%s, not ours: %v, want it kept", other, err)
	}
	var buf binary.Buffer
	sf.load(logfmt(&buf))
	if want := `msg="removed the temporary files of a state file write that an earlier run did not finish" state_file=` + path + " files=2"; !strings.Contains(buf.String(), want) {
		t.Errorf("log lacks %q; log:\n%s", want, buf.String())
	}
}

// prober is a fakeTarget that refuses connections while down, and can be
// probed.
type prober struct {
	fakeTarget
	mu     sync.Mutex
	down   bool
	probes int
}

var errRefused = fmt.Errorf("POST http://app/-/reload: connection refused: %w", syscall.ECONNREFUSED)

func (p *prober) Notify(ctx context.Context) error {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if err := p.fakeTarget.Notify(ctx); err != nil {
		return err
	}
	if down {
		return errRefused
	}
	return nil
}

func (p *prober) Reachable(context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes++
	return !p.down
}

func (p *prober) setDown(v bool) {
	p.mu.Lock()
	p.down = v
	p.mu.Unlock()
}

func (p *prober) probeCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes
}

// TestProbe: a target that refused the connection is reloaded within a
// probe interval of coming back, not at the end of its backoff.
func TestProbe(t *testing.T) {
	tests := []struct {
		name      string
		probe     time.Duration
		err       error // the failure while down; nil: refused
		wantAfter time.Duration
		wantProbe bool
	}{
		{"probe finds the app back", 200 * time.Millisecond, nil, 200 * time.Millisecond, true},
		{"no probe: the backoff decides", 0, nil, 5 * time.Second, false},
		{"not probed after another error", 200 * time.Millisecond, errors.New("status 500"), 5 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &prober{fakeTarget: fakeTarget{name: "app"}, down: true}
				if tt.err != nil {
					p.down = false
					p.errs = repeatErr(tt.err, 1)
				}
				h := start(t, []notifier.Target{p}, Options{Backoff: fixedBackoff(5 * time.Second), ProbeInterval: tt.probe})
				h.change("/etc/a") // fails at once, next attempt in 5s
				time.Sleep(time.Second + 50*time.Millisecond)
				t0 := time.Now()
				p.setDown(false) // back 1.05s after the failure
				time.Sleep(time.Minute)
				synctest.Wait()
				calls := p.times()
				if len(calls) != 2 {
					t.Fatalf("requests = %d, want 2 (the refused one, then the reload)", len(calls))
				}
				// The first probe after t0 is at 1.2s; the backoff ends at 5s.
				want := calls[0].Add(tt.wantAfter)
				if tt.wantProbe {
					want = calls[0].Add(time.Second + tt.probe)
				}
				if d := calls[1].Sub(want); d < -time.Millisecond || d > time.Millisecond { // fixedBackoff is 1µs short
					t.Errorf("reloaded %v after the app came back, want %v", calls[1].Sub(t0), want.Sub(t0))
				}
				if got := p.probeCount() > 0; got != tt.wantProbe {
					t.Errorf("probed = %v (%d probes), want %v", got, p.probeCount(), tt.wantProbe)
				}
				h.stop(t)
			})
		})
	}
}

func repeatErr(err error, n int) []error {
	s := make([]error, n)
	for i := range s {
		s[i] = err
	}
	return s
}

// TestContentMetric: one series per volume, for the content every target was
// given; the old series goes when the content changes.
func TestContentMetric(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one, two := &fakeTarget{name: "one"}, &fakeTarget{name: "two"}
		h := start(t, []notifier.Target{one, two}, Options{
			Retries: 1,
			Initial: initial(map[string][32]byte{"/etc/a": hashOf(1)}),
		})
		synctest.Wait()
		want := func(v int) string {
			return fmt.Sprintf(`
# HELP hotreload_volume_content_info 1 for the content every target was last given, per volume: hash is the first 12 hex digits of its content value (HMAC-SHA256 under the content key, else SHA-256; none for a Secret volume without a key). One series per volume.
# TYPE hotreload_volume_content_info gauge
hotreload_volume_content_info{dir="/etc/a",hash="%s"} 1
`, valueOf(v)[:12])
		}
		check := func(v int, when string) {
			t.Helper()
			if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want(v)), "hotreload_volume_content_info"); err != nil {
				t.Errorf("%s: %v", when, err)
			}
		}
		check(1, "at start")
		h.changeTo("/etc/a", 2)
		synctest.Wait()
		check(2, "after a delivery")
		two.setFailAll(true)
		h.changeTo("/etc/a", 3)
		synctest.Wait()
		check(2, "while one target lacks the new content")
		h.stop(t)
	})
}

// contentLabels returns the hash label of hotreload_volume_content_info by
// dir.
func contentLabels(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "hotreload_volume_content_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["dir"]] = l["hash"]
		}
	}
	return out
}

// TestContentValue: what is shown of a volume's content. Without a key, a
// ConfigMap shows its content hash and a volume that may hold a Secret
// shows nothing; with a key, every volume shows HMAC-SHA256(key, hash),
// the same for pods that share the key, and unrelated to the hash itself.
func TestContentValue(t *testing.T) {
	const cm, secret = "/etc/config", "/etc/secret"
	sensitive := func(dir string) bool { return dir == secret }
	keyA, keyB := []byte("a key of 32 bytes or more, random"), []byte("another key, also long and random")
	hmacOf := func(key []byte, v int) string {
		h := hashOf(v)
		m := hmac.New(sha256.New, key)
		m.Write(h[:])
		return hex.EncodeToString(m.Sum(nil))[:12]
	}
	run := func(key []byte) (map[string]string, []Delivered) {
		var labels map[string]string
		var content []Delivered
		synctest.Test(t, func(t *testing.T) {
			h := start(t, []notifier.Target{&fakeTarget{name: "app"}}, Options{
				Key: key, Sensitive: sensitive,
				Initial: initial(map[string][32]byte{cm: hashOf(1), secret: hashOf(2)}),
			})
			synctest.Wait()
			labels = contentLabels(t, h.reg)
			h.stop(t)
		})
		return labels, content
	}
	t.Run("no key", func(t *testing.T) {
		labels, _ := run(nil)
		if want := map[string]string{cm: valueOf(1)[:12]}; !maps.Equal(labels, want) {
			t.Errorf("labels = %v, want %v: the ConfigMap's hash, nothing for the Secret", labels, want)
		}
	})
	t.Run("key", func(t *testing.T) {
		a1, _ := run(keyA)
		a2, _ := run(keyA)
		b, _ := run(keyB)
		if want := map[string]string{cm: hmacOf(keyA, 1), secret: hmacOf(keyA, 2)}; !maps.Equal(a1, want) {
			t.Errorf("labels = %v, want %v", a1, want)
		}
		if !maps.Equal(a1, a2) {
			t.Errorf("two pods with one key and the same content: %v and %v, want the same", a1, a2)
		}
		if a1[secret] == b[secret] || a1[secret] == valueOf(2)[:12] {
			t.Errorf("the Secret's value %s under key A, %s under key B, its hash %s: want all different", a1[secret], b[secret], valueOf(2)[:12])
		}
	})
	t.Run("content", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := New(nil, prometheus.NewRegistry(), []notifier.Target{&fakeTarget{name: "app"}}, Options{
				Sensitive: sensitive, Initial: initial(map[string][32]byte{cm: hashOf(1), secret: hashOf(2)}),
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- r.Run(ctx, nil) }()
			synctest.Wait()
			got := r.Content()
			cancel()
			<-done
			if len(got) != 2 || got[0].Dir != cm || got[0].Value != valueOf(1)[:12] || got[1].Dir != secret || got[1].Value != "" || got[1].At.IsZero() {
				t.Errorf("Content = %+v, want the ConfigMap with its value, the Secret with none", got)
			}
		})
	})
}

// TestStateFileKeepsNoHash: the state file holds the content values, never
// a content hash that could be tried against guesses: with a key, values
// keyed with it; without one, nothing for a volume that may hold a Secret.
// A restart compares what it can, and delivers what it cannot tell.
func TestStateFileKeepsNoHash(t *testing.T) {
	const cm, secret = "/etc/config", "/etc/secret"
	sensitive := func(dir string) bool { return dir == secret }
	key := []byte("a key of 32 bytes or more, random")
	content := map[string][32]byte{cm: hashOf(1), secret: hashOf(2)}
	restart := func(t *testing.T, path string, key []byte) (int, string) {
		return startWithState(t, path, Options{Key: key, Sensitive: sensitive, Initial: initial(content)})
	}
	t.Run("with a key", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		if n, _ := restart(t, path, key); n != 0 {
			t.Errorf("first start: %d reloads, want 0", n)
		}
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), valueOf(1)[:12]) || strings.Contains(string(b), valueOf(2)[:12]) {
			t.Errorf("the state file holds a content hash:\n%s", b)
		}
		if n, _ := restart(t, path, key); n != 0 {
			t.Errorf("restart with the same key and content: %d reloads, want 0", n)
		}
		n, log := restart(t, path, []byte("another key, also long and random"))
		if n != 1 || !strings.Contains(log, "another key): delivering them") {
			t.Errorf("restart with another key: %d reloads, want 1; log:\n%s", n, log)
		}
	})
	t.Run("without a key", func(t *testing.T) {
		key := []byte(nil)
		path := filepath.Join(t.TempDir(), "state.json")
		restart(t, path, key)
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), valueOf(2)[:12]) || !strings.Contains(string(b), valueOf(1)) {
			t.Errorf("the state file holds the Secret's hash, or not the ConfigMap's:\n%s", b)
		}
		n, log := restart(t, path, key)
		if n != 1 || !strings.Contains(log, "delivering them\" dirs="+secret+"\n") {
			t.Errorf("restart: %d reloads, want 1 for the Secret volume whose value is not kept; log:\n%s", n, log)
		}
	})
}

// TestStateFileFirstFormat: a state file of the first format, which kept
// the content hash, is read (a change made while down is still found) and
// rewritten in the current one, with a line that says so.
func TestStateFileFirstFormat(t *testing.T) {
	for _, tt := range []struct {
		name  string
		v     int
		wantN int
	}{{"unchanged", 5, 0}, {"changed while down", 4, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			writeState(t, path, "/etc/a", map[string]int{"app": tt.v})
			n, log := startWithState(t, path, Options{Sensitive: func(string) bool { return true }, Initial: initial(map[string][32]byte{"/etc/a": hashOf(5)})})
			if n != tt.wantN {
				t.Errorf("reloads at start = %d, want %d", n, tt.wantN)
			}
			if want := `msg="the state file is in the format of an earlier hotreload, which kept each volume's content hash: read, and rewritten in the current format, which does not"`; !strings.Contains(log, want) {
				t.Errorf("log lacks %s; log:\n%s", want, log)
			}
			b, _ := os.ReadFile(path)
			if !strings.HasPrefix(string(b), "{\n  \"hotreload_state\": 2,") || strings.Contains(string(b), valueOf(5)[:12]) || strings.Contains(string(b), valueOf(4)[:12]) {
				t.Errorf("state file after start:\n%s\nwant the current format, without the hash of a volume that may hold a Secret", b)
			}
		})
	}
}

// startWithState starts a Reloader of one target, "app", with opts and the
// state file at path, in a synctest bubble of its own, and returns the
// reloads it made at start and its log.
func startWithState(t *testing.T, path string, opts Options) (reloads int, log string) {
	t.Helper()
	var buf binary.Buffer
	synctest.Test(t, func(t *testing.T) {
		sf, err := OpenStateFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer sf.Close()
		f := &fakeTarget{name: "app"}
		opts.State = sf
		h := startWith(t, &buf, []notifier.Target{f}, opts)
		synctest.Wait()
		reloads = len(f.times())
		h.stop(t)
	})
	return reloads, buf.String()
}
