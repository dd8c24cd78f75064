package main

// What is delivered, and when (issue #9): the reloader compares with the
// content the app was last given, the startup content included; a change
// made while hotreload was not running is delivered at start when
// --state-file is set; an app that comes back after refusing connections
// is reloaded as soon as it listens again.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/poll"
	"github.com/hotreload/hotreload/watcher"
)

// changesTotal is hotreload_changes_total of p.
func changesTotal(p *e2etest.Proc) float64 {
	v, _ := p.Metric("hotreload_changes_total", nil)
	return v
}

// TestChangeWhileNotRunning: with --state-file, a change made while
// hotreload was stopped or killed is reloaded once when it starts again; a
// restart without a change, and the first start of the pod, reload nothing.
func TestChangeWhileNotRunning(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("key", "v1"))
	sentinel := volume(t, e2etest.Payload("sentinel", "start"))
	state := filepath.Join(t.TempDir(), "state.json")
	dirs := []string{vol.Dir, sentinel.Dir}

	// First start of the pod: the baseline is written, nothing reloaded.
	p := start(t, app, dirs, "--state-file="+state)
	poll.Eventually(t, waitFor, func() bool { _, err := os.Stat(state); return err == nil }, "no state file written at start")
	e2etest.Settle(t, p, app, sentinel)
	if got := app.Count(); got != 1 {
		t.Errorf("requests = %d, want 1 (the sentinel's): no reload at the pod's first start: %s", got, app)
	}
	p.Stop()

	// A restart without a change reloads nothing.
	p = start(t, app, dirs, "--state-file="+state)
	e2etest.Settle(t, p, app, sentinel)
	if got := app.Count(); got != 2 {
		t.Errorf("requests = %d, want 2: nothing changed while stopped: %s", got, app)
	}

	// v2 is delivered, then hotreload is killed (an OOM kill, a crash) and
	// v3 lands while it is down: the restart reloads v3 once.
	t0 := time.Now()
	e2etest.Write(t, vol, true, e2etest.Payload("key", "v2"))
	app.WaitAfter(t0, waitFor)
	poll.Eventually(t, waitFor, func() bool { return app.Pending() == 0 }, "the reload of v2 was not answered")
	p.Signal(syscall.SIGKILL)
	if _, err := p.Wait(waitFor); err == nil {
		t.Fatal("hotreload survived SIGKILL")
	}
	e2etest.Write(t, vol, true, e2etest.Payload("key", "v3"))
	p = start(t, app, dirs, "--state-file="+state)
	app.WaitCount(4, waitFor)
	p.WaitLog(waitFor, "content changed while hotreload was not running, reloading", "dirs="+vol.Dir)
	e2etest.Settle(t, p, app, sentinel)
	if got := app.Count(); got != 5 {
		t.Errorf("requests = %d, want 5: one reload at start, then the sentinel's: %s", got, app)
	}
	p.Stop()

	// The file now says v3 was delivered: another restart reloads nothing.
	p = start(t, app, dirs, "--state-file="+state)
	e2etest.Settle(t, p, app, sentinel)
	if got := app.Count(); got != 6 {
		t.Errorf("requests = %d, want 6: v3 was delivered before the restart: %s", got, app)
	}
	p.Stop()
}

// TestChangeWhileNotRunningWithoutStateFile: without --state-file the
// change cannot be seen, and the log says so and how to fix it.
func TestChangeWhileNotRunningWithoutStateFile(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("key", "v1"))
	p := start(t, app, []string{vol.Dir})
	p.WaitLog(waitFor, "no --state-file", "mount an emptyDir and set --state-file")
	if n := p.CountLog("--state-file"); n != 1 {
		t.Errorf("%d log lines about --state-file, want 1:\n%s", n, p.Logs())
	}
	p.Stop()
}

// TestStateFileCorrupt: a damaged state file is one warning; as it cannot
// say what the app has, the current content is delivered, and the file
// rewritten.
func TestStateFileCorrupt(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("key", "v1"))
	sentinel := volume(t, e2etest.Payload("sentinel", "start"))
	state := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(state, []byte(`{"version":1,"volumes":{"`+vol.Dir+`":{"x":{"hash":"3f2a`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, app, []string{vol.Dir, sentinel.Dir}, "--state-file="+state)
	p.WaitLog(waitFor, "level=warn", "cannot read the state file, so what the app has is not known: delivering the current content")
	app.WaitCount(1, waitFor)
	e2etest.Settle(t, p, app, sentinel)
	if got := app.Count(); got != 2 {
		t.Errorf("requests = %d, want 2 (the current content, then the sentinel's): %s", got, app)
	}
	b, err := os.ReadFile(state)
	if err != nil || !json.Valid(b) || !strings.Contains(string(b), strconv.Quote(vol.Dir)) {
		t.Errorf("state file after start = %q, %v; want it rewritten with %s", b, err, vol.Dir)
	}
	p.Stop()
}

// TestStateFileNotOurs: a --state-file that names a file hotreload did not
// write (here, the app's own config on a shared emptyDir) is refused at
// start in one line, and left as it was.
func TestStateFileNotOurs(t *testing.T) {
	t.Parallel()
	vol := volume(t, e2etest.Payload("key", "v1"))
	conf := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(conf, []byte("events {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e2etest.Run(t, waitFor, "--volume-dir="+vol.Dir, "--webhook-url=http://127.0.0.1:1/-/reload", "--state-file="+conf)
	want := "hotreload: error: --state-file " + conf + ": exists and was not written by hotreload: refusing to replace it; give a file of its own, on an emptyDir\n"
	if r.Code != 2 || r.Stderr != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", r.Code, r.Stderr, want)
	}
	if b, _ := os.ReadFile(conf); string(b) != "events {}\n" {
		t.Errorf("nginx.conf = %q, want it untouched", b)
	}
}

// TestStateFileShared: a second hotreload given the state file of a running
// one is refused in one line, instead of each losing the other's records.
func TestStateFileShared(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("key", "v1"))
	state := filepath.Join(t.TempDir(), "state.json")
	p := start(t, app, []string{vol.Dir}, "--state-file="+state)
	r := e2etest.Run(t, waitFor, "--volume-dir="+vol.Dir, "--webhook-url="+app.URL("/-/reload"), "--state-file="+state, "--web.listen-address=127.0.0.1:0")
	want := "hotreload: error: --state-file " + state + ": in use by another hotreload, which holds " + state + ".lock: give each hotreload a state file of its own\n"
	if r.Code != 2 || r.Stderr != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", r.Code, r.Stderr, want)
	}
	p.Stop()
}

// TestStateFileBadDirectory: a --state-file that cannot be written fails at
// start in one line naming the flag.
func TestStateFileBadDirectory(t *testing.T) {
	t.Parallel()
	vol := volume(t, e2etest.Payload("key", "v1"))
	missing := filepath.Join(t.TempDir(), "nope", "state.json")
	r := e2etest.Run(t, waitFor, "--volume-dir="+vol.Dir, "--webhook-url=http://127.0.0.1:1/-/reload", "--state-file="+missing)
	want := "hotreload: error: --state-file " + missing + ": directory " + filepath.Dir(missing) + " does not exist (mount an emptyDir there)\n"
	if r.Code != 2 || r.Stderr != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", r.Code, r.Stderr, want)
	}
}

// TestFirstBurstEndsOnStartupContent: a burst right after start that ends
// on the startup content reloads nothing, like every later one.
func TestFirstBurstEndsOnStartupContent(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("key", "v1"))
	sentinel := volume(t, e2etest.Payload("sentinel", "start"))
	p := start(t, app, []string{vol.Dir, sentinel.Dir}, "--debounce=1s")

	// Edited and restored within the debounce, each step seen.
	n := changesTotal(p)
	e2etest.Write(t, vol, true, e2etest.Payload("key", "v2"))
	poll.Eventually(t, waitFor, func() bool { return changesTotal(p) >= n+1 }, "the edit was not seen")
	e2etest.Write(t, vol, true, e2etest.Payload("key", "v1"))
	poll.Eventually(t, waitFor, func() bool { return changesTotal(p) >= n+2 }, "the restore was not seen")

	// The burst settles a second later, one way or the other.
	fired := func() bool {
		for _, f := range p.Fires() {
			if slices.Contains(f.Dirs, vol.Dir) {
				return true
			}
		}
		return false
	}
	poll.Eventually(t, waitFor, func() bool {
		return fired() || p.CountLog("content is what the app was last given, not reloading", "dirs="+vol.Dir) > 0
	}, "the burst did not settle")
	fire := e2etest.Settle(t, p, app, sentinel)
	if fired() {
		t.Errorf("reloaded for %s, want no reload: the burst ended on the startup content", vol.Dir)
	}
	if got := app.Count(); got != 1 || len(fire.Dirs) != 1 {
		t.Errorf("requests = %d, the last covering %v, want 1 for the sentinel alone: %s", got, fire.Dirs, app)
	}
	p.Stop()
}

// TestContentEndpoint: /-/content and hotreload_volume_content_info show the
// content the app was last given, one entry per volume, as its content
// value under --content-key-file: the same in two pods with the same key
// and content, and neither the content hash nor anything of it in the
// endpoints or the state file.
func TestContentEndpoint(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	payload := e2etest.Payload("pin", "123456")
	vol := volume(t, payload)
	keyFile := filepath.Join(t.TempDir(), "key")
	key := "c2VjcmV0IGtleSBvZiB0aGlydHktdHdvIGJ5dGVzIQ=="
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state.json")
	p := start(t, app, []string{vol.Dir}, "--content-key-file="+keyFile, "--state-file="+state)

	valueOf := func(dir string) (value, hash string) {
		sum, err := watcher.HashDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		m := hmac.New(sha256.New, []byte(key))
		m.Write(sum[:])
		return hex.EncodeToString(m.Sum(nil))[:12], hex.EncodeToString(sum[:])
	}
	check := func(p *e2etest.Proc, dir, when string) string {
		t.Helper()
		want, hash := valueOf(dir)
		var got struct {
			Volumes []struct {
				Dir         string    `json:"dir"`
				Hash        string    `json:"hash"`
				DeliveredAt time.Time `json:"delivered_at"`
			} `json:"volumes"`
		}
		var body string
		poll.Eventually(t, waitFor, func() bool {
			var code int
			var err error
			code, body, err = p.Get("/-/content")
			if err != nil || code != 200 || json.Unmarshal([]byte(body), &got) != nil {
				return false
			}
			return len(got.Volumes) == 1 && got.Volumes[0].Hash == want
		}, "%s: /-/content = %+v, want %s with hash %s", when, got, dir, want)
		if got.Volumes[0].Dir != dir || got.Volumes[0].DeliveredAt.IsZero() {
			t.Errorf("%s: /-/content = %+v", when, got)
		}
		mfs := p.Scrape()
		series := mfs["hotreload_volume_content_info"].GetMetric()
		if len(series) != 1 {
			t.Fatalf("%s: %d series of hotreload_volume_content_info, want 1", when, len(series))
		}
		if v, ok := binary.Value(mfs, "hotreload_volume_content_info", map[string]string{"dir": dir, "hash": want}); !ok || v != 1 {
			t.Errorf("%s: hotreload_volume_content_info{dir=%q,hash=%q} = %v, %v; want 1", when, dir, want, v, ok)
		}
		_, metrics, _ := p.Get("/metrics")
		for what, text := range map[string]string{"/-/content": body, "/metrics": metrics} {
			if strings.Contains(text, hash[:12]) {
				t.Errorf("%s: %s shows the content hash %s", when, what, hash[:12])
			}
		}
		return want
	}
	first := check(p, vol.Dir, "at start")

	// Another pod of the workload, with the same content and key, shows
	// the same value.
	other := volume(t, payload)
	p2 := start(t, app, []string{other.Dir}, "--content-key-file="+keyFile)
	if got := check(p2, other.Dir, "another pod"); got != first {
		t.Errorf("another pod with the same content and key shows %s, want %s", got, first)
	}
	p2.Stop()

	t0 := time.Now()
	e2etest.Write(t, vol, true, e2etest.Payload("pin", "654321"))
	app.WaitAfter(t0, waitFor)
	check(p, vol.Dir, "after a reload")
	p.Stop()
	b, err := os.ReadFile(state)
	_, hash := valueOf(vol.Dir)
	if err != nil || strings.Contains(string(b), hash[:12]) {
		t.Errorf("state file %v:\n%s\nholds the content hash %s", err, b, hash[:12])
	}
}

// TestAppBackIsReloadedAtOnce: an app that refused connections is reloaded
// within a probe interval of listening again, not when the backoff ends.
func TestAppBackIsReloadedAtOnce(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	vol := volume(t, e2etest.Payload("key", "v1"))
	p := start(t, app, []string{vol.Dir}, "--webhook-max-backoff=20s", "--log.level=debug")
	failure := map[string]string{"target": app.URL("/-/reload"), "result": "failure"}

	app.Down()
	e2etest.Write(t, vol, true, e2etest.Payload("key", "v2"))
	// Six refused attempts: the next one is 3.2s to 6.4s away.
	poll.Eventually(t, 3*waitFor, func() bool {
		v, _ := p.Metric("hotreload_reloads_total", failure)
		return v >= 6
	}, "fewer than 6 failed attempts")
	upAt := time.Now()
	app.Up()
	req := app.WaitAfter(upAt, waitFor)
	if took := req.Start.Sub(upAt); took > 2*time.Second {
		t.Errorf("reloaded %v after the app came back, want well before the backoff's next attempt (>= 3.2s after the 6th)", took)
	}
	if got := app.Count(); got != 1 {
		t.Errorf("requests = %d, want 1: %s", got, app)
	}
	p.Stop()
}
