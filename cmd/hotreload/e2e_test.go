package main

// End-to-end tests: the binary runs as a real process against an httptest
// app, while the tests play the kubelet (test/support/kubelet) on volumes in
// t.TempDir(). Nothing sleeps to wait for an event: every wait polls with a
// deadline. Where a test must show that something did NOT happen (noise
// reloads nothing, no reload at start), it makes a real change afterwards
// and waits for that change's reload (e2etest.Settle): the watcher handles
// events and the reloader handles changes in order, so by then anything
// the earlier actions caused has been counted. hotreload_changes_total
// counts exactly, whatever the debounce merges, so the noise checks assert
// on it too.

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// waitFor bounds every wait for something that normally takes
// milliseconds; it is generous for a loaded CI machine.
const waitFor = 10 * time.Second

// start runs hotreload on dirs with app's /-/reload as the target, plus
// extra flags, and waits until it is ready.
func start(t *testing.T, app *e2etest.App, dirs []string, extra ...string) *e2etest.Proc {
	t.Helper()
	var args []string
	for _, d := range dirs {
		args = append(args, "--volume-dir="+d)
	}
	if app != nil {
		args = append(args, "--webhook-url="+app.URL("/-/reload"))
	}
	p := e2etest.Start(t, append(args, extra...)...)
	p.WaitReady(waitFor)
	return p
}

// volume returns a kubelet volume in a new temporary directory, populated
// with payload (as the kubelet does before the pod starts) unless it is
// nil.
func volume(t *testing.T, payload map[string]kubelet.File) *kubelet.Volume {
	t.Helper()
	v := kubelet.New(filepath.Join(t.TempDir(), "vol"))
	if payload != nil {
		e2etest.Write(t, v, true, payload)
	}
	return v
}

// metric returns the value of a metric that must exist.
func metric(t *testing.T, p *e2etest.Proc, name string, labels map[string]string) float64 {
	t.Helper()
	return p.MustMetric(name, labels)
}

// TestUpdatesReloadOnce: every kubelet update reloads the app exactly once,
// whatever it changes (a value, a new key, a vanished key, a nested item),
// and noise (an identical re-write, fsGroup chmods, reads) reloads nothing.
func TestUpdatesReloadOnce(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("app.properties", "color=blue", "mode", "fast"))
	sentinel := volume(t, e2etest.Payload("sentinel", "start"))
	p := start(t, app, []string{vol.Dir, sentinel.Dir})

	steps := []struct {
		name    string
		payload map[string]kubelet.File
	}{
		{"value changed", e2etest.Payload("app.properties", "color=red", "mode", "fast")},
		{"key added", e2etest.Payload("app.properties", "color=red", "mode", "fast", "extra", "1")},
		{"nested item", e2etest.Payload("app.properties", "color=red", "mode", "fast", "extra", "1", "conf.d/default.conf", "listen 80")},
		{"nested item changed", e2etest.Payload("app.properties", "color=red", "mode", "fast", "extra", "1", "conf.d/default.conf", "listen 81")},
		{"key vanished", e2etest.Payload("app.properties", "color=red", "mode", "fast", "conf.d/default.conf", "listen 81")},
		{"nested item vanished", e2etest.Payload("app.properties", "color=red", "mode", "fast")},
		{"value changed again", e2etest.Payload("app.properties", "color=green", "mode", "fast")},
	}
	for i, s := range steps {
		t0 := time.Now()
		e2etest.Write(t, vol, true, s.payload)
		app.WaitAfter(t0, waitFor)
		if got := app.Count(); got != i+1 {
			t.Fatalf("after step %d (%s): app got %d reloads, want %d: %s", i+1, s.name, got, i+1, app)
		}
	}

	// Noise: an identical re-write (the kubelet writes nothing), fsGroup
	// chmods, reads through the visible links.
	events := metric(t, p, "hotreload_watch_events_total", nil)
	changes := metric(t, p, "hotreload_changes_total", nil)
	e2etest.Write(t, vol, false, steps[len(steps)-1].payload)
	for range 3 {
		if err := vol.Chmod(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.ReadFile(filepath.Join(vol.Dir, "app.properties")); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, waitFor, func() bool {
		return metric(t, p, "hotreload_watch_events_total", nil) > events
	}, "the chmods made no watch event: the noise was not seen, the test proves nothing")

	e2etest.Settle(t, p, app, sentinel)
	if got := metric(t, p, "hotreload_changes_total", nil) - changes; got != 1 {
		t.Errorf("noise then one sentinel change: %v changes detected, want 1", got)
	}
	if got, want := app.Count(), len(steps)+1; got != want {
		t.Errorf("app got %d reloads, want %d (one per update, one for the sentinel, none for noise): %s", got, want, app)
	}
	if got, want := metric(t, p, "hotreload_reloads_total", map[string]string{"result": "success"}), float64(app.Count()); got != want {
		t.Errorf("hotreload_reloads_total{result=success} = %v, want %v", got, want)
	}
	p.Stop()
}

// TestNoiseOnly: with no real change, nothing that the kubelet or a
// careless neighbour does without changing content reloads the app.
func TestNoiseOnly(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	payload := e2etest.Payload("app.properties", "color=blue", "conf.d/default.conf", "listen 80")
	vol := volume(t, payload)
	sentinel := volume(t, e2etest.Payload("sentinel", "start"))
	p := start(t, app, []string{vol.Dir, sentinel.Dir}, "--debounce=0")

	events := metric(t, p, "hotreload_watch_events_total", nil)
	for i := range 5 {
		e2etest.Write(t, vol, false, payload) // identical: no filesystem event at all
		if err := vol.Chmod(); err != nil {
			t.Fatal(err)
		}
		// Touch the visible files (new mtime, same content).
		now := time.Now().Add(time.Duration(i) * time.Second)
		for _, name := range []string{"app.properties", "conf.d/default.conf"} {
			if err := os.Chtimes(filepath.Join(vol.Dir, name), now, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll.Eventually(t, waitFor, func() bool {
		return metric(t, p, "hotreload_watch_events_total", nil) > events
	}, "the noise made no watch event: the test proves nothing")

	e2etest.Settle(t, p, app, sentinel)
	if got := metric(t, p, "hotreload_changes_total", nil); got != 1 {
		t.Errorf("hotreload_changes_total = %v, want 1 (the sentinel only)", got)
	}
	if got := app.Count(); got != 1 {
		t.Errorf("app got %d reloads, want 1 (the sentinel only): %s", got, app)
	}
	p.Stop()
}

// TestBurstAcrossVolumes: five volumes (a ConfigMap, a Secret, ...) swapped
// together reload the app once, at most twice.
func TestBurstAcrossVolumes(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	var vols []*kubelet.Volume
	var dirs []string
	for i := range 5 {
		v := volume(t, e2etest.Payload("key", fmt.Sprint("v1 of ", i)))
		vols = append(vols, v)
		dirs = append(dirs, v.Dir)
	}
	p := start(t, app, dirs)

	for i, v := range vols {
		e2etest.Write(t, v, true, e2etest.Payload("key", fmt.Sprint("v2 of ", i)))
	}
	// Every volume's change has been fired once every dir appears in a
	// "reloading" line; the request of the last such line is then the last.
	poll.Eventually(t, waitFor, func() bool {
		covered := map[string]bool{}
		for _, f := range p.Fires() {
			for _, d := range f.Dirs {
				covered[d] = true
			}
		}
		for _, d := range dirs {
			if !covered[d] {
				return false
			}
		}
		return true
	}, "not every volume's change was fired")
	n := len(p.Fires())
	poll.Eventually(t, waitFor, func() bool { return app.Completed(http.StatusOK) >= n },
		"%d reloads fired, app answered %s", n, app)

	if got := metric(t, p, "hotreload_changes_total", nil); got != 5 {
		t.Errorf("hotreload_changes_total = %v, want 5", got)
	}
	if got := app.Count(); got < 1 || got > 2 {
		t.Errorf("a burst across 5 volumes made %d reloads, want 1 (at most 2): %s", got, app)
	}
	t.Logf("burst across 5 volumes: %d reload(s), fired %+v", app.Count(), p.Fires())
	p.Stop()
}

// TestAppUnavailable: an app that refuses connections, or answers 500 (a
// Prometheus with an invalid config), gets the reload once it is back.
func TestAppUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		breakApp  func(*e2etest.App)
		fixApp    func(*e2etest.App)
		wantCalls func(int) bool // requests the app saw, failed ones included
	}{
		{
			name:      "connection refused",
			breakApp:  func(a *e2etest.App) { a.Down() },
			fixApp:    func(a *e2etest.App) { a.Up() },
			wantCalls: func(n int) bool { return n == 1 }, // only the one after Up
		},
		{
			name:      "status 500",
			breakApp:  func(a *e2etest.App) { a.SetStatus(http.StatusInternalServerError, "invalid config") },
			fixApp:    func(a *e2etest.App) { a.SetStatus(http.StatusOK, "") },
			wantCalls: func(n int) bool { return n >= 3 },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			app := e2etest.NewApp(t)
			vol := volume(t, e2etest.Payload("key", "v1"))
			p := start(t, app, []string{vol.Dir}, "--webhook-max-backoff=300ms")
			target := map[string]string{"target": app.URL("/-/reload")}
			failure := map[string]string{"target": app.URL("/-/reload"), "result": "failure"}
			success := map[string]string{"target": app.URL("/-/reload"), "result": "success"}

			tc.breakApp(app)
			e2etest.Write(t, vol, true, e2etest.Payload("key", "v2"))
			// Down for a few failed attempts (a second or so).
			poll.Eventually(t, waitFor, func() bool {
				v, _ := p.Metric("hotreload_reloads_total", failure)
				return v >= 3
			}, "fewer than 3 failed attempts")
			if got := metric(t, p, "hotreload_last_reload_successful", target); got != 0 {
				t.Errorf("hotreload_last_reload_successful = %v while the app is down, want 0", got)
			}
			if p.CountLog("level=warn", "reload failed, retrying") == 0 {
				t.Errorf("no warning about the failed attempts")
			}
			upAt := time.Now()
			tc.fixApp(app)

			poll.Eventually(t, waitFor, func() bool {
				v, _ := p.Metric("hotreload_reloads_total", success)
				return v == 1
			}, "no successful reload after the app came back")
			if got := metric(t, p, "hotreload_last_reload_successful", target); got != 1 {
				t.Errorf("hotreload_last_reload_successful = %v, want 1", got)
			}
			if ts := metric(t, p, "hotreload_last_reload_success_timestamp_seconds", target); ts < float64(upAt.Unix()) {
				t.Errorf("hotreload_last_reload_success_timestamp_seconds = %v, before the app came back (%d)", ts, upAt.Unix())
			}
			if got := app.Completed(http.StatusOK); got != 1 {
				t.Errorf("app answered 200 to %d reloads, want 1: %s", got, app)
			}
			if !tc.wantCalls(app.Count()) {
				t.Errorf("app saw %d requests: %s", app.Count(), app)
			}
			p.Stop()
		})
	}
}

// TestSlowApp: a 3s reload and five quick updates make at most two
// requests, the last one after the last update (latest wins). Debounce is
// off so that each update is its own reload: coalescing is the delivery's
// doing, not the debounce's.
func TestSlowApp(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	app.SetDelay(3 * time.Second)
	vol := volume(t, e2etest.Payload("key", "v0"))
	p := start(t, app, []string{vol.Dir}, "--debounce=0")

	var lastWrite time.Time
	for i := 1; i <= 5; i++ {
		e2etest.Write(t, vol, true, e2etest.Payload("key", fmt.Sprint("v", i)))
		lastWrite = time.Now()
		// Each update is seen (and fired) before the next one is written.
		poll.Eventually(t, waitFor, func() bool { return len(p.Fires()) >= i },
			"update %d was not fired", i)
	}
	// Every update was fired; a request that starts after the last fire
	// carries the newest content, and its answer ends the deliveries.
	fires := p.Fires()
	lastFire := fires[len(fires)-1].Time
	poll.Eventually(t, 2*waitFor, func() bool {
		reqs := app.Requests()
		if len(reqs) == 0 {
			return false
		}
		last := reqs[len(reqs)-1]
		return last.Start.After(lastFire) && !last.End.IsZero()
	}, "no completed request after the last reload was fired: %s", app)
	reqs := app.Requests()
	if last := reqs[len(reqs)-1]; !last.Start.After(lastWrite) {
		t.Errorf("the last request started at %s, before the last update at %s", last.Start, lastWrite)
	}
	poll.Eventually(t, waitFor, func() bool {
		v, _ := p.Metric("hotreload_reloads_total", map[string]string{"result": "success"})
		return v == float64(app.Count())
	}, "hotreload did not count the last reload")

	if got := app.Count(); got > 2 {
		t.Errorf("5 updates to a 3s app made %d requests, want at most 2: %s", got, app)
	}
	p.Stop()
}

// TestLateVolume: a volume that does not exist at start is waited for
// (logged once, not fatal, not holding readiness back), and reloads once it
// appears and on every later update.
func TestLateVolume(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	present := volume(t, e2etest.Payload("key", "v1"))
	late := kubelet.New(filepath.Join(t.TempDir(), "not", "yet"))
	p := start(t, app, []string{present.Dir, late.Dir})

	p.WaitLog(waitFor, "volume does not exist yet", late.Dir)
	if got := metric(t, p, "hotreload_watched_dirs", nil); got != 1 {
		t.Errorf("hotreload_watched_dirs = %v with one volume missing, want 1", got)
	}

	t0 := time.Now()
	e2etest.Write(t, late, true, e2etest.Payload("key", "v1", "conf.d/nested", "n1"))
	app.WaitAfter(t0, waitFor)
	poll.Eventually(t, waitFor, func() bool {
		v, _ := p.Metric("hotreload_watched_dirs", nil)
		return v == 2
	}, "the late volume is not watched")

	for i := 2; i <= 3; i++ {
		t0 := time.Now()
		e2etest.Write(t, late, true, e2etest.Payload("key", fmt.Sprint("v", i), "conf.d/nested", "n1"))
		app.WaitAfter(t0, waitFor)
	}
	if got := p.CountLog("volume does not exist yet"); got != 1 {
		t.Errorf("logged %d times that the volume does not exist, want once", got)
	}
	if code := p.Status("/-/ready"); code != http.StatusOK {
		t.Errorf("GET /-/ready = %d, want 200", code)
	}
	p.Stop()
}

// TestVolumeRecreated: a volume deleted and re-created is watched again.
// Deleted at once (renamed away) and re-created at once (renamed into
// place) with the same content, it reloads nothing; a later update reloads.
// Deleted file by file (rm -rf) and re-created by the kubelet, it is watched
// again too.
func TestVolumeRecreated(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	v1 := e2etest.Payload("key", "v1", "conf.d/nested", "n1")
	vol := volume(t, v1)
	sentinel := volume(t, e2etest.Payload("sentinel", "start"))
	p := start(t, app, []string{vol.Dir, sentinel.Dir})
	watched := func(want float64) func() bool {
		return func() bool {
			v, _ := p.Metric("hotreload_watched_dirs", nil)
			return v == want
		}
	}

	for _, tc := range []struct {
		name     string
		remove   func() error
		recreate func() error
		exact    bool // no reload for the removal and the re-creation
	}{
		{
			name: "at once",
			remove: func() error {
				gone := vol.Dir + ".gone"
				if err := os.Rename(vol.Dir, gone); err != nil {
					return err
				}
				return os.RemoveAll(gone)
			},
			recreate: func() error {
				// The kubelet's links are relative: a volume written
				// elsewhere can be renamed into place.
				staging := vol.Dir + ".staging"
				if _, err := kubelet.New(staging).Write(v1); err != nil {
					return err
				}
				return os.Rename(staging, vol.Dir)
			},
			exact: true,
		},
		// Removed entry by entry and re-created step by step, the volume
		// may be hashed half-removed or half-written, which is a real
		// (if passing) change of content: only the later update is checked.
		{
			name:     "file by file",
			remove:   func() error { return os.RemoveAll(vol.Dir) },
			recreate: func() error { _, err := vol.Write(v1); return err },
		},
	} {
		before := app.Count()
		if err := tc.remove(); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, waitFor, watched(1), "%s: the deleted volume is still counted as watched", tc.name)
		if err := tc.recreate(); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, waitFor, watched(2), "%s: the re-created volume is not watched", tc.name)

		t0 := time.Now()
		e2etest.Write(t, vol, true, e2etest.Payload("key", "v2 "+tc.name, "conf.d/nested", "n1"))
		app.WaitAfter(t0, waitFor)
		t0 = time.Now()
		e2etest.Write(t, vol, true, v1) // back to v1 for the next case
		app.WaitAfter(t0, waitFor)
		if tc.exact {
			e2etest.Settle(t, p, app, sentinel)
			if got, want := app.Count()-before, 3; got != want {
				t.Errorf("%s: app got %d reloads, want %d (one per update, one sentinel, none for the deletion or the identical re-creation): %s",
					tc.name, got, want, app)
			}
		}
	}
	if got := p.CountLog("volume removed, waiting for it", vol.Dir); got != 2 {
		t.Errorf("logged the removal %d times, want 2", got)
	}
	p.Stop()
}

// TestPlainDirectory: a directory that is not a kubelet volume (hostPath,
// emptyDir filled by another container, docker compose) reloads once for
// each change, including in subdirectories created later.
func TestPlainDirectory(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	dir := t.TempDir()
	scratch := t.TempDir() // same filesystem, outside the watched dir
	if err := os.WriteFile(filepath.Join(dir, "app.conf"), []byte("a=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, app, []string{dir})

	write := func(name, data string) func() error {
		return func() error { return os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644) }
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"file created", write("new.conf", "b=1\n")},
		{"file rewritten in place", write("app.conf", "a=2\n")},
		{"file appended to", func() error {
			f, err := os.OpenFile(filepath.Join(dir, "app.conf"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			if _, err := f.WriteString("c=3\n"); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}},
		{"file renamed into place", func() error {
			tmp := filepath.Join(scratch, "app.conf.tmp")
			if err := os.WriteFile(tmp, []byte("a=3\n"), 0o644); err != nil {
				return err
			}
			return os.Rename(tmp, filepath.Join(dir, "app.conf"))
		}},
		{"file removed", func() error { return os.Remove(filepath.Join(dir, "new.conf")) }},
		{"subdirectory with a file", func() error {
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "sub", "deep.conf"), []byte("d=1\n"), 0o644)
		}},
		{"file in the new subdirectory rewritten", write("sub/deep.conf", "d=2\n")},
		{"nested subdirectory with a file", func() error {
			if err := os.MkdirAll(filepath.Join(dir, "sub", "x", "y"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "sub", "x", "y", "z.conf"), []byte("z=1\n"), 0o644)
		}},
		{"subdirectory removed", func() error { return os.RemoveAll(filepath.Join(dir, "sub")) }},
	}
	for i, s := range steps {
		t0 := time.Now()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		app.WaitAfter(t0, waitFor)
		if got := app.Count(); got != i+1 {
			t.Fatalf("after %q: app got %d reloads, want %d: %s", s.name, got, i+1, app)
		}
	}

	// Noise: chmod and touch (an in-place rewrite with the same bytes is
	// not noise: the file is empty for a moment). Then a sentinel change.
	events := metric(t, p, "hotreload_watch_events_total", nil)
	changes := metric(t, p, "hotreload_changes_total", nil)
	if err := os.Chmod(filepath.Join(dir, "app.conf"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "app.conf"), later, later); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, waitFor, func() bool {
		return metric(t, p, "hotreload_watch_events_total", nil) > events
	}, "the noise made no watch event")
	// The sentinel is renamed into place: one atomic change.
	t0 := time.Now()
	if err := os.WriteFile(filepath.Join(scratch, "last.conf"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(scratch, "last.conf"), filepath.Join(dir, "last.conf")); err != nil {
		t.Fatal(err)
	}
	app.WaitAfter(t0, waitFor)
	if got := metric(t, p, "hotreload_changes_total", nil) - changes; got != 1 {
		t.Errorf("noise then one sentinel change: %v changes detected, want 1", got)
	}
	if got, want := app.Count(), len(steps)+1; got != want {
		t.Errorf("app got %d reloads, want %d (one per step, none for noise): %s", got, want, app)
	}
	p.Stop()
}

// TestBadCommandLine: a bad command line exits at once, non-zero, with one
// line on stderr that names the flag.
func TestBadCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "regular")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	const url = "--webhook-url=http://127.0.0.1:9/-/reload"
	vol := "--volume-dir=" + dir
	listen := "--web.listen-address=127.0.0.1:0"

	for _, tc := range []struct {
		name string
		args []string
		want string // in the line
	}{
		{"unknown flag", []string{vol, url, listen, "--no-such-flag"}, "--no-such-flag"},
		{"no volume", []string{url, listen}, "--volume-dir"},
		{"no target", []string{vol, listen}, "--webhook-url"},
		{"url does not parse", []string{vol, "--webhook-url=::bad", listen}, "--webhook-url"},
		{"url scheme", []string{vol, "--webhook-url=ftp://x", listen}, "--webhook-url"},
		{"url without host", []string{vol, "--webhook-url=http:///reload", listen}, "--webhook-url"},
		{"method with a space", []string{vol, url, "--webhook-method=PO ST", listen}, "--webhook-method"},
		{"negative debounce", []string{vol, url, "--debounce=-1s", listen}, "--debounce"},
		{"duration without unit", []string{vol, url, "--debounce=100", listen}, "--debounce"},
		{"negative retries", []string{vol, url, "--webhook-retries=-1", listen}, "--webhook-retries"},
		{"status code", []string{vol, url, "--webhook-status-code=2x5", listen}, "--webhook-status-code"},
		{"header without colon", []string{vol, url, "--webhook-header=X-Token secret", listen}, "--webhook-header"},
		{"volume is a file", []string{"--volume-dir=" + file, url, listen}, "--volume-dir"},
		{"empty volume", []string{"--volume-dir=", url, listen}, "--volume-dir"},
		{"log level", []string{vol, url, "--log.level=loud", listen}, "--log.level"},
		{"port in use", []string{vol, url, "--web.listen-address=" + busy.Addr().String()}, "--web.listen-address"},
		{"listen address without port", []string{vol, url, "--web.listen-address=localhost"}, "--web.listen-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e2etest.Run(t, waitFor, tc.args...)
			if r.Code == 0 {
				t.Fatalf("exit code 0, want non-zero; stderr:\n%s", r.Stderr)
			}
			lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
			if len(lines) != 1 || lines[0] == "" {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), r.Stderr)
			}
			if !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("stderr %q does not name %s", r.Stderr, tc.want)
			}
			if r.Took > 5*time.Second {
				t.Errorf("took %s to exit, want at once", r.Took)
			}
			t.Logf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
		})
	}
}

// TestCredentialsNotShown: the app receives every credential, and none of
// them appears in a log line (debug level included) or in /metrics, even
// when the app echoes them back in its error responses.
func TestCredentialsNotShown(t *testing.T) {
	t.Parallel()
	const (
		password = "Pa55w0rdSecret"
		query    = "QueryT0kenSecret"
		header   = "HeaderSecretValue"
		token1   = "BearerT0kenOne"
		token2   = "BearerT0kenTwo"
	)
	basic := base64.StdEncoding.EncodeToString([]byte("admin:" + password))
	secrets := []string{password, query, header, token1, token2, basic}

	for _, tc := range []struct {
		name   string
		url    func(app *e2etest.App) string
		bearer bool
		known  []string // the secrets this process is given, which the app echoes
		check  func(t *testing.T, r e2etest.Request, token string)
	}{
		{
			name: "basic auth, query and header",
			url: func(app *e2etest.App) string {
				return "http://admin:" + password + "@" + app.Addr() + "/-/reload?token=" + query + "&verbose=1"
			},
			known: []string{password, basic, query, header},
			check: func(t *testing.T, r e2etest.Request, _ string) {
				if got, want := r.Header.Get("Authorization"), "Basic "+basic; got != want {
					t.Errorf("Authorization = %q, want %q", got, want)
				}
			},
		},
		{
			name:   "bearer token file, rotated",
			url:    func(app *e2etest.App) string { return "http://" + app.Addr() + "/-/reload?token=" + query },
			bearer: true,
			known:  []string{token1, query, header},
			check: func(t *testing.T, r e2etest.Request, token string) {
				if got, want := r.Header.Get("Authorization"), "Bearer "+token; got != want {
					t.Errorf("Authorization = %q, want %q", got, want)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			app := e2etest.NewApp(t)
			// The app rejects the first attempts and quotes what it got.
			app.FailNext(2, "rejected: "+strings.Join(tc.known, " "))
			vol := volume(t, e2etest.Payload("key", "v1"))
			args := []string{
				"--volume-dir=" + vol.Dir,
				"--webhook-url=" + tc.url(app),
				"--webhook-header=X-Api-Key: " + header,
				"--webhook-max-backoff=200ms",
				"--log.level=debug",
			}
			tokenFile := filepath.Join(t.TempDir(), "token")
			if tc.bearer {
				if err := os.WriteFile(tokenFile, []byte(token1+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--webhook-bearer-token-file="+tokenFile)
			}
			p := e2etest.Start(t, args...)
			p.WaitReady(waitFor)

			token := token1
			for i := 2; i <= 3; i++ {
				if i == 3 && tc.bearer {
					token = token2 // rotated: the next call reads the new one
					if err := os.WriteFile(tokenFile, []byte(token2+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				t0 := time.Now()
				e2etest.Write(t, vol, true, e2etest.Payload("key", fmt.Sprint("v", i)))
				app.WaitAfter(t0, waitFor)
				poll.Eventually(t, waitFor, func() bool { return app.Completed(http.StatusOK) == i-1 },
					"update %d not reloaded: %s", i, app)
				reqs := app.Requests()
				r := reqs[len(reqs)-1]
				if got := r.URL.Query().Get("token"); got != query {
					t.Errorf("app got token=%q, want %q", got, query)
				}
				if got := r.Header.Get("X-Api-Key"); got != header {
					t.Errorf("app got X-Api-Key %q, want %q", got, header)
				}
				tc.check(t, r, token)
			}

			_, metrics, err := p.Get("/metrics")
			if err != nil {
				t.Fatal(err)
			}
			_, root, _ := p.Get("/")
			p.Stop()
			if p.CountLog("reload failed, retrying") == 0 {
				t.Errorf("no log line for the rejected attempts: the test proves less than it should")
			}
			for _, s := range secrets {
				for where, text := range map[string]string{"logs": p.Logs(), "stdout": p.Stdout(), "/metrics": metrics, "/": root} {
					if strings.Contains(text, s) {
						t.Errorf("%s contain the secret %q", where, s)
					}
				}
			}
			if !strings.Contains(metrics, "xxxxx") {
				t.Errorf("/metrics has no redacted target label")
			}
		})
	}
}

// TestShutdownDuringReload: SIGTERM during a slow reload lets the request
// finish within --shutdown-grace, then exits 0; past the grace period the
// reload is abandoned, and it still exits 0.
func TestShutdownDuringReload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		grace         string
		wantCompleted bool
		wantLog       string
	}{
		{"request completes", "10s", true, "msg=reloaded"},
		{"grace period over", "300ms", false, "reload abandoned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			app := e2etest.NewApp(t)
			app.SetDelay(2 * time.Second)
			vol := volume(t, e2etest.Payload("key", "v1"))
			p := start(t, app, []string{vol.Dir}, "--debounce=0", "--shutdown-grace="+tc.grace)

			e2etest.Write(t, vol, true, e2etest.Payload("key", "v2"))
			app.WaitCount(1, waitFor) // in flight now
			p.Stop()
			exited := time.Now()
			p.WaitLog(0, tc.wantLog)
			r := app.Requests()[0]
			completed := !r.End.IsZero() && !r.Cut && r.Status == http.StatusOK && !r.End.After(exited)
			if completed != tc.wantCompleted {
				t.Errorf("request completed before exit: %v, want %v (request %v..%v, exit %v)",
					completed, tc.wantCompleted, r.Start, r.End, exited)
			}
			if app.Count() != 1 {
				t.Errorf("app got %d requests, want 1: %s", app.Count(), app)
			}
		})
	}
}

// TestReloadOnStart: no reload at start unless --reload-on-start, which
// reloads exactly once.
func TestReloadOnStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		want  int
	}{
		{"default", nil, 0},
		{"reload-on-start", []string{"--reload-on-start"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			app := e2etest.NewApp(t)
			vol := volume(t, e2etest.Payload("key", "v1"))
			p := start(t, app, []string{vol.Dir}, tc.flags...)
			if tc.want > 0 {
				app.WaitCount(tc.want, waitFor)
			}
			// A change after start is a sync point: its reload comes
			// after any reload at start.
			t0 := time.Now()
			e2etest.Write(t, vol, true, e2etest.Payload("key", "v2"))
			app.WaitAfter(t0, waitFor)
			atStart := 0
			for _, r := range app.Requests() {
				if r.Start.Before(t0) {
					atStart++
				}
			}
			if atStart != tc.want || app.Count() != tc.want+1 {
				t.Errorf("%d reloads at start and %d in all, want %d and %d: %s", atStart, app.Count(), tc.want, tc.want+1, app)
			}
			p.Stop()
		})
	}
}

// freePort returns a TCP address on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestConfigmapReloadCommandLine: the command line that the Prometheus and
// Alertmanager charts give configmap-reload works unchanged, with the same
// meaning (--webhook-retries=1: one attempt per change).
func TestConfigmapReloadCommandLine(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("prometheus.yml", "global: {}"))
	addr := freePort(t)
	p := e2etest.Start(t,
		"--volume-dir="+vol.Dir,
		"--webhook-url="+app.URL("/-/reload"),
		"--webhook-method=POST",
		"--webhook-status-code=200",
		"--webhook-retries=1",
		"--web.listen-address="+addr,
		"--web.telemetry-path=/metrics",
	)
	p.WaitReady(waitFor)
	if p.Addr() != addr {
		t.Errorf("listens on %s, want %s", p.Addr(), addr)
	}
	failure := map[string]string{"result": "failure"}

	// One attempt per change: a rejected config is not retried...
	app.FailNext(1, "invalid config")
	t0 := time.Now()
	e2etest.Write(t, vol, true, e2etest.Payload("prometheus.yml", "global: {scrape_interval: 1s"))
	app.WaitAfter(t0, waitFor)
	poll.Eventually(t, waitFor, func() bool { v, _ := p.Metric("hotreload_reloads_total", failure); return v == 1 },
		"the rejected attempt was not counted")
	p.WaitLog(waitFor, "no attempts left")
	// ...and the fixed config reloads (the sync point that shows it was not).
	t0 = time.Now()
	e2etest.Write(t, vol, true, e2etest.Payload("prometheus.yml", "global: {scrape_interval: 1s}"))
	r := app.WaitAfter(t0, waitFor)
	if r.Method != http.MethodPost {
		t.Errorf("method %s, want POST", r.Method)
	}
	if got := app.Count(); got != 2 {
		t.Errorf("app got %d requests, want 2 (no retry of the rejected one): %s", got, app)
	}
	poll.Eventually(t, waitFor, func() bool {
		v, _ := p.Metric("hotreload_last_reload_successful", nil)
		return v == 1
	}, "hotreload_last_reload_successful is not 1 after the fixed config")
	p.Stop()
}

// TestMetricsAndHealth: every metric of the issue is exposed with the right
// value after one reload, along with the Go and process collectors, and the
// health endpoints answer.
func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol1 := volume(t, e2etest.Payload("a", "1"))
	vol2 := volume(t, e2etest.Payload("b", "1"))
	startedAt := time.Now()
	p := start(t, app, []string{vol1.Dir, vol2.Dir}, "--web.telemetry-path=/custom-metrics")

	if code := p.Status("/-/healthy"); code != http.StatusOK {
		t.Errorf("GET /-/healthy = %d, want 200", code)
	}
	if code := p.Status("/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics = %d with --web.telemetry-path=/custom-metrics, want 404", code)
	}
	before := p.ScrapePath("/custom-metrics")
	if v, ok := binary.Value(before, "hotreload_changes_total", nil); !ok || v != 0 {
		t.Errorf("hotreload_changes_total before any change = %v (present: %v), want 0", v, ok)
	}

	t0 := time.Now()
	e2etest.Write(t, vol1, true, e2etest.Payload("a", "2"))
	app.WaitAfter(t0, waitFor)
	target := map[string]string{"target": app.URL("/-/reload")}
	var mfs = before
	poll.Eventually(t, waitFor, func() bool {
		mfs = p.ScrapePath("/custom-metrics")
		v, _ := binary.Value(mfs, "hotreload_reloads_total", map[string]string{"result": "success"})
		return v == 1
	}, "no successful reload counted")

	for _, tc := range []struct {
		name   string
		labels map[string]string
		check  func(v float64) bool
		want   string
	}{
		{"hotreload_build_info", map[string]string{"version": e2etest.TestVersion, "revision": "e2e"}, eq(1), "1"},
		{"hotreload_watched_dirs", nil, eq(2), "2"},
		{"hotreload_changes_total", nil, eq(1), "1"},
		{"hotreload_watch_events_total", nil, gt(0), "> 0"},
		{"hotreload_watch_errors_total", nil, eq(0), "0"},
		{"hotreload_reloads_total", map[string]string{"target": app.URL("/-/reload"), "result": "success"}, eq(1), "1"},
		{"hotreload_reload_duration_seconds", target, eq(1), "1 observation"},
		{"hotreload_last_reload_successful", target, eq(1), "1"},
		{"hotreload_last_reload_success_timestamp_seconds", target, gt(float64(startedAt.Unix() - 1)), "since start"},
		{"go_goroutines", nil, gt(0), "> 0"},
		{"go_memstats_heap_inuse_bytes", nil, gt(0), "> 0"},
		{"process_resident_memory_bytes", nil, gt(0), "> 0"},
		{"process_open_fds", nil, gt(0), "> 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := binary.Value(mfs, tc.name, tc.labels)
			if !ok {
				t.Fatalf("no %s%v", tc.name, tc.labels)
			}
			if !tc.check(v) {
				t.Errorf("%s%v = %v, want %s", tc.name, tc.labels, v, tc.want)
			}
		})
	}
	if v, ok := binary.Value(mfs, "hotreload_reloads_total", map[string]string{"result": "failure"}); ok && v != 0 {
		t.Errorf("hotreload_reloads_total{result=failure} = %v, want 0 or absent", v)
	}
	p.Stop()
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func gt(min float64) func(float64) bool  { return func(v float64) bool { return v > min } }
