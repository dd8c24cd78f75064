//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// TestRestartByAnnotation: an app whose config is in env vars (a ref with
// no volume) is restarted in place when, and only when, the pod's
// annotation names a new revision of that ref: never at start, nor for
// another annotation or another ref's revision. Runs in a fresh PID
// namespace, where a shell loop plays the kubelet, starting the app's
// container again whenever its main process exits.
func TestRestartByAnnotation(t *testing.T) {
	t.Parallel()
	if !e2etest.InPIDNamespace(t) {
		return
	}
	dir := t.TempDir()
	restarts := filepath.Join(dir, "restarts")
	// The app is "sleep 3601", which SIGTERM ends; the shell is its
	// kubelet. The selector is anchored, so the shell never matches.
	kubeletLoop := exec.Command("sh", "-c", `while [ ! -e "$1/stop" ]; do sleep 3601; echo restarted >> "$1/restarts"; done`, "sh", dir)
	kubeletLoop.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := kubeletLoop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
		_ = syscall.Kill(-kubeletLoop.Process.Pid, syscall.SIGKILL)
		_ = kubeletLoop.Wait()
	})

	pod := kubelet.New(filepath.Join(dir, "pod"))
	annotate := func(annotations map[string]string) {
		t.Helper()
		keys := make([]string, 0, len(annotations))
		for k := range annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lines []string
		for _, k := range keys {
			lines = append(lines, fmt.Sprintf("%s=%q", k, annotations[k]))
		}
		if _, err := pod.Write(map[string]kubelet.File{"annotations": {Data: []byte(strings.Join(lines, "\n"))}}); err != nil {
			t.Fatal(err)
		}
	}
	revisions := func(env, other string) map[string]string {
		return map[string]string{"hotreload.dev/revisions": fmt.Sprintf(`{"configmap/env-config":%q,"configmap/other":%q}`, env, other)}
	}
	annotate(revisions("1", "1"))

	p := e2etest.Start(t, "--restart-container", `--process-cmdline=^sleep 3601$`, "--restart-grace=5s", "--restart-settle=200ms",
		"--view=ref=configmap/env-config", "--pod-annotations="+filepath.Join(pod.Dir, "annotations"), "--debounce=10ms")
	p.WaitReady(waitFor)
	waitView(t, p, func(v viewState) bool { return v.Result == "applied" && v.Running == "1" && v.Want == "1" })

	// Not a restart: another annotation, another ref's revision, the
	// revisions unchanged.
	withOther := revisions("1", "2")
	withOther["team"] = "payments"
	annotate(withOther)
	annotate(revisions("1", "3"))

	// A restart: the revision of env-config.
	annotate(revisions("2", "3"))
	v := waitView(t, p, func(v viewState) bool { return v.Result == "applied" && v.Running == "2" })
	if v.Dir != "" {
		t.Errorf("view %+v: a ref with no volume has no dir", v)
	}
	success := map[string]string{"target": "restart:cmdline", "result": "success"}
	if got := metric(t, p, "hotreload_reloads_total", success); got != 1 {
		t.Errorf("%v restarts, want 1", got)
	}
	poll.Eventually(t, waitFor, func() bool { b, _ := os.ReadFile(restarts); return string(b) == "restarted\n" },
		"the app was not restarted exactly once")

	// Back to revision 1 (a rollback by the controller) is a restart too.
	annotate(revisions("1", "3"))
	waitView(t, p, func(v viewState) bool { return v.Result == "applied" && v.Running == "1" })
	if got := metric(t, p, "hotreload_reloads_total", success); got != 2 {
		t.Errorf("%v restarts, want 2", got)
	}
	p.Stop()
	if b, _ := os.ReadFile(restarts); string(b) != "restarted\nrestarted\n" {
		t.Errorf("restarts %q, want two", b)
	}
}

// TestRestartReportsWhyItCannot: a restart whose app process cannot be
// found (here, no process matches) keeps the view pending and says why in
// /-/content, in one line with the advice, so that the controller can
// abort a rollout at once instead of waiting for its deadline.
func TestRestartReportsWhyItCannot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pod := kubelet.New(filepath.Join(dir, "pod"))
	annotate := func(rev string) {
		t.Helper()
		line := fmt.Sprintf("hotreload.dev/revisions=%q", fmt.Sprintf(`{"configmap/env-config":%q}`, rev))
		if _, err := pod.Write(map[string]kubelet.File{"annotations": {Data: []byte(line)}}); err != nil {
			t.Fatal(err)
		}
	}
	annotate("1")
	absent := fmt.Sprintf("^hotreload-test-absent-%d$", os.Getpid())
	p := e2etest.Start(t, "--restart-container", "--process-cmdline="+absent, "--restart-settle=200ms",
		"--view=ref=configmap/env-config", "--pod-annotations="+filepath.Join(pod.Dir, "annotations"), "--debounce=10ms")
	p.WaitReady(waitFor)
	waitView(t, p, func(v viewState) bool { return v.Result == "applied" && v.Running == "1" })

	annotate("2")
	v := waitView(t, p, func(v viewState) bool { return v.Running == "2" && v.Error != "" })
	if v.Result != "pending" || !strings.Contains(v.Error, "no process") || !strings.Contains(v.Error, "shareProcessNamespace: true") || strings.Contains(v.Error, "\n") {
		t.Errorf("view %+v: want pending, with one line that says no process matched and how to fix it", v)
	}
}
