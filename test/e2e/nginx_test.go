//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
)

// TestNginxSignal reloads nginx by SIGHUP through the pod's shared process
// namespace, for each way of running hotreload next to nginx, and checks
// what really happens: the master keeps its pid, its workers are replaced,
// nginx serves the new config; or, where kill(2) is not allowed, hotreload
// reports the failure and says what works.
func TestNginxSignal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// nginxRoot runs the nginx master as root (as the official image
		// does), hotreload as hotreloadUID with only CAP_KILL.
		nginxRoot   bool
		hotreloadAs int64
		works       bool
	}{
		// The example as shipped: nginx and hotreload both uid 101. The
		// other two change its pod template (securityContext only).
		{name: "same uid", hotreloadAs: 101, works: true},
		// A non-root container with capabilities.add [KILL] has KILL in
		// its bounding set only: EPERM against a root master.
		{name: "root master, hotreload 65532 with KILL added", nginxRoot: true, hotreloadAs: 65532, works: false},
		// What works against a root master: root with every capability
		// dropped but KILL.
		{name: "root master, hotreload root with only KILL", nginxRoot: true, hotreloadAs: 0, works: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t)
			manifests := readManifest(t, "examples/nginx/sidecar.yaml")
			if c.nginxRoot {
				manifests = withTemplate(t, manifests, func(pod object) {
					dig[object](pod, "spec", "securityContext")["runAsNonRoot"] = false
					nginx := containerNamed(pod, "nginx")["securityContext"].(object)
					nginx["runAsUser"], nginx["runAsGroup"] = 0, 0
					// The master needs setuid/setgid to start workers as nginx.
					nginx["capabilities"] = object{"drop": []any{"ALL"}, "add": []any{"SETUID", "SETGID", "CHOWN"}}
					hr := containerNamed(pod, "hotreload")["securityContext"].(object)
					hr["runAsUser"], hr["runAsGroup"] = c.hotreloadAs, c.hotreloadAs
					hr["runAsNonRoot"] = c.hotreloadAs != 0
					hr["capabilities"] = object{"drop": []any{"ALL"}, "add": []any{"KILL"}}
				})
			}
			apply(t, ns, manifests)
			p := onePod(t, ns, "nginx")
			name, page, hotreloadMetrics := p.Metadata.Name, p.url(8080, "/"), p.url(hotreloadPort, "/metrics")
			waitBody(t, nudgeWait, page, "hello from config v1")

			master := mainProc(t, ns, name, "nginx")
			workers := children(t, ns, name, "nginx", master.PID)
			hr := mainProc(t, ns, name, "hotreload")
			t.Logf("nginx master %v, %d workers; hotreload %v", master, len(workers), hr)
			if len(workers) == 0 {
				t.Fatalf("nginx master %v has no workers", master)
			}

			editConfigMap(t, ns, "nginx-config", "default.conf", func(s string) string {
				return strings.Replace(s, "hello from config v1", "hello from config v2", 1)
			})
			nudge(t, ns, name)
			if !c.works {
				waitMetric(t, nudgeWait, hotreloadMetrics, "hotreload_last_reload_successful", nil, 0)
				waitFor(t, nudgeWait, func() bool {
					return strings.Contains(containerLogs(ns, name, "hotreload", false), "operation not permitted")
				}, func() string { return "hotreload logged no EPERM:\n" + containerLogs(ns, name, "hotreload", false) })
				if hr.CapBnd&(1<<capKill) == 0 || hr.CapEff&(1<<capKill) != 0 {
					t.Errorf("hotreload %v: want KILL in its bounding set only", hr)
				}
				if _, body, _ := binary.Get(page); !strings.Contains(body, "v1") {
					t.Errorf("nginx serves %q, want the old config", body)
				}
				return
			}
			waitBody(t, nudgeWait, page, "hello from config v2")
			waitMetric(t, nudgeWait, hotreloadMetrics, "hotreload_last_reload_successful", nil, 1)
			after := mainProc(t, ns, name, "nginx")
			if after.PID != master.PID || after.Start != master.Start {
				t.Fatalf("nginx master changed from %v to %v: it was restarted, not reloaded", master, after)
			}
			// nginx retires its old workers once they finish their requests.
			waitFor(t, 10*time.Second, func() bool {
				for _, w := range children(t, ns, name, "nginx", master.PID) {
					if slices.ContainsFunc(workers, func(old hostProc) bool { return old.PID == w.PID }) {
						return false
					}
				}
				return true
			}, func() string { return "nginx's old workers are still there after the reload" })
			waitMetric(t, nudgeWait, hotreloadMetrics, "hotreload_reloads_total", map[string]string{"result": "success"}, 1)
			if c.nginxRoot {
				return
			}

			// An invalid config: nginx logs the error and keeps its old
			// config and workers; hotreload sees that no worker was
			// replaced and reports the reload as failed.
			editConfigMap(t, ns, "nginx-config", "default.conf", func(s string) string {
				return strings.Replace(s, "listen 8080;", "listen 8080;\n      e2e_not_a_directive on;", 1)
			})
			nudge(t, ns, name)
			waitMetric(t, nudgeWait, hotreloadMetrics, "hotreload_last_reload_successful", nil, 0)
			waitFor(t, nudgeWait, func() bool {
				return strings.Contains(containerLogs(ns, name, "hotreload", false), "kept its workers")
			}, func() string {
				return "hotreload did not say nginx kept its workers:\n" + containerLogs(ns, name, "hotreload", false)
			})
			if _, body, _ := binary.Get(page); !strings.Contains(body, "hello from config v2") {
				t.Fatalf("nginx serves %q after refusing a config; want the old one", body)
			}
			// The fixed config reloads.
			editConfigMap(t, ns, "nginx-config", "default.conf", func(s string) string {
				s = strings.Replace(s, "\n      e2e_not_a_directive on;", "", 1)
				return strings.Replace(s, "hello from config v2", "hello from config v3", 1)
			})
			nudge(t, ns, name)
			waitBody(t, nudgeWait, page, "hello from config v3")
			waitMetric(t, nudgeWait, hotreloadMetrics, "hotreload_last_reload_successful", nil, 1)
		})
	}
}

// containerNamed returns a container of a pod object by name.
func containerNamed(pod object, name string) object {
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := dig[object](pod, "spec")[list].([]any)
		for _, c := range cs {
			if c := c.(object); c["name"] == name {
				return c
			}
		}
	}
	return nil
}
