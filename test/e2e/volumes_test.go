//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSecretAndProjectedTogether: a Secret volume (tmpfs) and a projected
// volume (a ConfigMap and the same Secret) change in one kubelet sync; the
// app is reloaded once, and that reload already sees both changes.
//
// Not parallel: it needs the kubelet to refresh both volumes within the
// debounce, and beside the parallel tests (TestRollout among them) a
// .ci/run of 2026-11-26 saw three attempts in a row drift apart.
func TestSecretAndProjectedTogether(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: one}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: first}
`))
	p := testPod{
		name: "both",
		volumes: []object{
			{"name": "secret", "secret": object{"secretName": "creds"}},
			{"name": "projected", "projected": object{"sources": []any{
				object{"configMap": object{"name": "settings"}},
				object{"secret": object{"name": "creds", "items": []any{object{"key": "password", "path": "db/password"}}}},
			}}},
		},
		mounts: map[string]string{"secret": "/etc/creds", "projected": "/etc/all"},
	}
	p = p.start(t, ns)
	waitLoaded(t, nudgeWait, p.app(), "/etc/all/mode", "one")
	warmUp(t, ns, p, "/etc/all")
	for attempt := 1; ; attempt++ {
		mode, password := fmt.Sprint("two-", attempt), fmt.Sprint("second-", attempt)
		if oneSync(t, ns, p, mode, password, attempt == 3) {
			return
		}
		if t.Failed() {
			return
		}
	}
}

// oneSync edits the ConfigMap and the Secret of TestSecretAndProjectedTogether
// at once and nudges the kubelet. It reports false, and waits for the rest
// of the update, if the kubelet wrote the projected volume with the new
// ConfigMap before its Secret cache had the new password: two syncs, which
// rightly make two reloads, and not what the test is about. On the last
// attempt that fails the test.
func oneSync(t *testing.T, ns string, p testPod, mode, password string, last bool) bool {
	t.Helper()
	before, err := appConfig(p.app())
	if err != nil {
		t.Fatal(err)
	}
	changesBefore, _, _ := metric(p.metrics(), "hotreload_changes_total", nil)
	reloadsBefore, _, _ := metric(p.metrics(), "hotreload_reloads_total", map[string]string{"result": "success"})

	// Both edits at once, then one kubelet sync for both.
	var wg sync.WaitGroup
	for _, patch := range [][]string{
		{"secret", "creds", fmt.Sprintf(`{"stringData":{"password":%q}}`, password)},
		{"configmap", "settings", fmt.Sprintf(`{"data":{"mode":%q}}`, mode)},
	} {
		wg.Go(func() {
			if _, err := kubectl(nil, "-n", ns, "patch", patch[0], patch[1], "--type=merge", "-p", patch[2]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return false
	}
	nudge(t, ns, p.name)
	after := waitLoaded(t, nudgeWait, p.app(), "/etc/all/mode", mode)
	if got := after.Files["/etc/all/db/password"]; got != password && !last {
		t.Logf("the kubelet wrote the projected volume with mode=%s and the old password %q (its Secret cache was behind): two syncs; trying again", mode, got)
		nudge(t, ns, p.name)
		waitLoaded(t, nudgeWait, p.app(), "/etc/all/db/password", password)
		waitLoaded(t, nudgeWait, p.app(), "/etc/creds/password", password)
		return false
	}
	for _, f := range []string{"/etc/creds/password", "/etc/all/db/password"} {
		if after.Files[f] != password {
			t.Errorf("the reload that brought mode=%s saw %s = %q, want %s", mode, f, after.Files[f], password)
		}
	}
	if after.Generation != before.Generation+1 {
		t.Errorf("app went from generation %d to %d: want one reload for both volumes", before.Generation, after.Generation)
	}
	waitMetric(t, nudgeWait, p.metrics(), "hotreload_changes_total", nil, changesBefore+2)
	if v, _, _ := metric(p.metrics(), "hotreload_reloads_total", map[string]string{"result": "success"}); v != reloadsBefore+1 {
		t.Errorf(`hotreload_reloads_total{result="success"} went from %v to %v, want one more`, reloadsBefore, v)
	}
	return true
}

// TestChangeWhileHotreloadIsDown: hotreload's container dies (SIGKILL, as
// the OOM killer would) right after a ConfigMap edit; the kubelet, syncing
// the pod because the container died, writes the new content before it
// starts hotreload again. With --state-file on an emptyDir, the restarted
// hotreload sees that the content differs from what the app was given, and
// reloads it.
func TestChangeWhileHotreloadIsDown(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	apply(t, ns, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: before}
`))
	p := testPod{
		name: "restart",
		volumes: []object{
			configMapVolume("config", "settings"),
			{"name": "state", "emptyDir": object{"sizeLimit": "1Mi"}},
		},
		mounts:        map[string]string{"config": "/etc/config"},
		hotreloadArgs: []string{"--state-file=/var/run/hotreload/state.json"},
		hotreloadSpec: func(c object) {
			c["volumeMounts"] = append(c["volumeMounts"].([]any), object{"name": "state", "mountPath": "/var/run/hotreload"})
		},
	}
	p = p.start(t, ns)
	waitLoaded(t, nudgeWait, p.app(), "/etc/config/mode", "before")
	warmUp(t, ns, p, "/etc/config")

	// The kubelet restarts a container that died at once the first time,
	// and after a back-off of 10s the next: kill hotreload once and let it
	// come back, so that the second death keeps it down while the kubelet,
	// syncing the pod because the container died, writes the new content.
	// (Restarted at once, hotreload would see the write as it happens, an
	// ordinary change.)
	kill(t, mainProc(t, ns, p.name, "hotreload"), syscall.SIGKILL)
	waitRestarts(t, ns, p.name, "hotreload", 1)
	waitFor(t, nudgeWait, func() bool {
		pod, err := getPod(ns, p.name)
		c, _ := pod.container("hotreload")
		return err == nil && c.Ready
	}, func() string { return "hotreload did not come back after the first kill" })
	// A sync is followed, about a second later, by another refresh of the
	// pod's volumes, which would carry an edit made now to the hotreload
	// about to be killed. Let it pass: the edit must land while hotreload
	// is down.
	time.Sleep(3 * time.Second)

	patchConfigMap(t, ns, "settings", map[string]string{"mode": "after"})
	kill(t, mainProc(t, ns, p.name, "hotreload"), syscall.SIGKILL)
	if l, err := appConfig(p.app()); err == nil && l.Files["/etc/config/mode"] == "after" {
		t.Fatal("the edit reached the app before hotreload was killed: the kubelet refreshed the volume too soon for this test")
	}
	waitLoaded(t, podWait, p.app(), "/etc/config/mode", "after")
	waitRestarts(t, ns, p.name, "hotreload", 2)
	if logs := containerLogs(ns, p.name, "hotreload", false); !strings.Contains(logs, "content changed while hotreload was not running") {
		t.Errorf("the restarted hotreload did not say why it reloaded at start:\n%s", logs)
	}
}

// waitRestarts waits until a container's restart count is at least n.
func waitRestarts(t *testing.T, ns, name, container string, n int) {
	t.Helper()
	var restarts int
	waitFor(t, podWait, func() bool {
		pod, err := getPod(ns, name)
		c, _ := pod.container(container)
		restarts = c.RestartCount
		return err == nil && restarts >= n
	}, func() string { return fmt.Sprintf("%s's restart count is %d, want %d", container, restarts, n) })
}

// TestUnreadableSecret: a Secret item with mode 0400 and no fsGroup is
// readable by its owner (root) only. hotreload, as 65532, cannot read it,
// yet sees its rotation by what it can see (size, times, inode), reloads
// the app, which runs as root here and reads it, and says what to change.
func TestUnreadableSecret(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	apply(t, ns, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: first}\n"))
	p := testPod{
		name:    "unreadable",
		volumes: []object{{"name": "creds", "secret": object{"secretName": "creds", "defaultMode": 0o400}}},
		mounts:  map[string]string{"creds": "/etc/creds"},
		appSpec: func(c object) {
			sc := c["securityContext"].(object)
			sc["runAsUser"], sc["runAsNonRoot"] = 0, false
		},
	}
	p = p.start(t, ns)
	waitLoaded(t, nudgeWait, p.app(), "/etc/creds/password", "first")

	patchSecret(t, ns, "creds", map[string]string{"password": "second"})
	nudge(t, ns, p.name)
	waitLoaded(t, nudgeWait, p.app(), "/etc/creds/password", "second")
	logs := containerLogs(ns, p.name, "hotreload", false)
	for _, want := range []string{"fsGroup", "defaultMode"} {
		if !strings.Contains(logs, want) {
			t.Errorf("hotreload's log does not say what to change (%q):\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "second") {
		t.Errorf("hotreload's log shows the Secret's value:\n%s", logs)
	}
}
