//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestHardened: hotreload in the tightest pod a cluster allows: a read-only
// root, non-root, every capability dropped, probed on /-/healthy and
// /-/ready. It becomes Ready, and runs as 65532 with group 65532 (not 0)
// though the pod sets no runAsGroup: the image's USER says both.
func TestHardened(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	apply(t, ns, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: one}\n"))
	p := testPod{
		name:    "hardened",
		volumes: []object{configMapVolume("config", "settings")},
		mounts:  map[string]string{"config": "/etc/config"},
	}
	apply(t, ns, p.manifest(t))
	pod := waitReady(t, ns, p.name)
	if c, _ := pod.container("hotreload"); !c.Ready || c.RestartCount != 0 {
		t.Fatalf("hotreload container: ready %v, %d restarts", c.Ready, c.RestartCount)
	}
	hr := mainProc(t, ns, p.name, "hotreload")
	if hr.UID != 65532 || hr.GID != 65532 {
		t.Errorf("hotreload runs as %v: want uid and gid 65532", hr)
	}
	if hr.CapEff != 0 {
		t.Errorf("hotreload has capabilities %#x: want none", hr.CapEff)
	}
}

// TestSubPathRefused: a ConfigMap key mounted with subPath never updates;
// given as --volume-dir, hotreload refuses it at start with a hint that
// works (mount the whole volume), instead of a Ready pod that never reloads.
// A bare Pod with restartPolicy Never: the test reads the exit code and the
// one log line of hotreload's only run, which a Deployment's pod (always
// restarted) would bury under restarts.
func TestSubPathRefused(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	apply(t, ns, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {app.conf: one}
---
apiVersion: v1
kind: Pod
metadata: {name: subpath}
spec:
  automountServiceAccountToken: false
  restartPolicy: Never
  containers:
    - name: hotreload
      image: localhost/hotreload:e2e
      imagePullPolicy: Never
      args: [--volume-dir=/etc/app/app.conf, --webhook-url=http://127.0.0.1:18104/, --web.listen-address=:19104]
      volumeMounts:
        - {name: config, mountPath: /etc/app/app.conf, subPath: app.conf, readOnly: true}
  volumes:
    - {name: config, configMap: {name: settings}}
`))
	var c containerStatus
	waitFor(t, podWait, func() bool {
		p, err := getPod(ns, "subpath")
		if err != nil {
			return false
		}
		c, _ = p.container("hotreload")
		return c.State.Terminated != nil
	}, func() string { return "hotreload did not exit" })
	// The log of a container that has just exited can take a moment to be
	// served.
	var logs string
	waitFor(t, nudgeWait, func() bool {
		logs = containerLogs(ns, "subpath", "hotreload", false)
		return strings.Contains(logs, "hotreload: error")
	}, func() string { return "hotreload's log has no error line:\n" + logs })
	if c.State.Terminated.ExitCode != 2 {
		t.Errorf("hotreload exited %d, want 2 (bad input)", c.State.Terminated.ExitCode)
	}
	for _, want := range []string{"--volume-dir /etc/app/app.conf", "subPath", "mount the whole volume into hotreload's container"} {
		if !strings.Contains(logs, want) {
			t.Errorf("hotreload's error does not say %q:\n%s", want, logs)
		}
	}
	if n := strings.Count(strings.TrimSpace(logs), "\n"); n != 0 {
		t.Errorf("want one line, got %d:\n%s", n+1, logs)
	}
}
