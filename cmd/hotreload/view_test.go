package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// viewState is one view of GET /-/content.
type viewState struct {
	Ref      string    `json:"ref"`
	Dir      string    `json:"dir"`
	Want     string    `json:"want"`
	Running  string    `json:"running"`
	Result   string    `json:"result"`
	Error    string    `json:"error"`
	Rejected string    `json:"rejected"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// waitView waits until /-/content shows one view for which ok holds, and
// returns it.
func waitView(t *testing.T, p *e2etest.Proc, ok func(viewState) bool) viewState {
	t.Helper()
	var got struct{ Views []viewState }
	poll.EventuallyMsg(t, waitFor, func() bool {
		code, body, err := p.Get("/-/content")
		return err == nil && code == 200 && json.Unmarshal([]byte(body), &got) == nil && len(got.Views) == 1 && ok(got.Views[0])
	}, func() string { return fmt.Sprintf("/-/content views: %+v", got.Views) })
	return got.Views[0]
}

func readApp(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestViewLastKnownGood: a standalone view (no controller) writes the
// source into the app's directory before hotreload is ready, and each edit
// after; an edit the app refuses is put back to the previous version at
// once, is not retried, and shows in /-/content and the metrics; the next
// edit goes through.
func TestViewLastKnownGood(t *testing.T) {
	t.Parallel()
	app := e2etest.NewApp(t)
	src := volume(t, e2etest.Payload("app.yaml", "v0", "empty", ""))
	dir := filepath.Join(t.TempDir(), "app")
	p := e2etest.Start(t, "--view=ref=configmap/app,source="+src.Dir+",dir="+dir,
		"--webhook-url="+app.URL("/-/reload"), "--webhook-max-backoff=100ms", "--debounce=100ms")
	p.WaitReady(waitFor)
	if got := readApp(t, dir, "app.yaml"); got != "v0" {
		t.Fatalf("ready with app.yaml %q in the app's directory, want v0", got)
	}
	v0 := waitView(t, p, func(v viewState) bool { return v.Result == "applied" })
	if v0.Ref != "configmap/app" || v0.Dir != dir || len(v0.Running) != 12 {
		t.Errorf("view %+v", v0)
	}

	edit := func(data string) {
		t.Helper()
		e2etest.Write(t, src, true, map[string]kubelet.File{"app.yaml": {Data: []byte(data)}, "empty": {}})
	}
	t0 := time.Now()
	edit("v1")
	app.WaitAfter(t0, waitFor)
	v1 := waitView(t, p, func(v viewState) bool { return v.Result == "applied" && v.Running != v0.Running })
	if got := readApp(t, dir, "app.yaml"); got != "v1" {
		t.Fatalf("app.yaml %q, want v1", got)
	}

	// The app refuses v2: v1 goes back into its directory.
	app.SetStatus(500, "error loading config: line 1: password=hunter2 is not allowed")
	edit("v2")
	rejected := waitView(t, p, func(v viewState) bool { return v.Result == "rejected" })
	if got := readApp(t, dir, "app.yaml"); got != "v1" {
		t.Errorf("after the refusal app.yaml is %q, want v1 put back", got)
	}
	if rejected.Running != v1.Running || rejected.Rejected == "" || rejected.Rejected == v1.Running ||
		rejected.Error != "POST "+app.URL("/-/reload")+": status 500" {
		t.Errorf("view after the refusal %+v: want v1 running, v2 rejected, the status without the app's answer", rejected)
	}
	if got := metric(t, p, "hotreload_view_rollbacks_total", map[string]string{"ref": "configmap/app"}); got != 1 {
		t.Errorf("hotreload_view_rollbacks_total = %v, want 1", got)
	}
	if got := metric(t, p, "hotreload_view_revision_info", map[string]string{"ref": "configmap/app", "revision": v1.Running, "result": "rejected"}); got != 1 {
		t.Errorf("hotreload_view_revision_info{revision=%s,result=rejected} = %v, want 1", v1.Running, got)
	}
	if got := metric(t, p, "hotreload_last_reload_successful", map[string]string{"target": app.URL("/-/reload")}); got != 0 {
		t.Errorf("hotreload_last_reload_successful = %v, want 0", got)
	}

	// Fixed: v3 reloads. A retry of v2 would have come within the 100ms
	// backoff, before v3's reload (debounced by 100ms): there was none.
	app.SetStatus(200, "")
	t0 = time.Now()
	edit("v3")
	app.WaitAfter(t0, waitFor)
	waitView(t, p, func(v viewState) bool { return v.Result == "applied" && v.Running != v1.Running })
	if got := readApp(t, dir, "app.yaml"); got != "v3" {
		t.Errorf("app.yaml %q, want v3", got)
	}
	if got := app.Count(); got != 3 {
		t.Errorf("%d reloads, want 3 (v1, v2 refused once, v3): %s", got, app)
	}
	p.Stop()
	if p.CountLog("component=view", "hunter2") > 0 {
		t.Error("a view's log line quotes the app's answer")
	}
}
