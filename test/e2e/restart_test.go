//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	crl "github.com/hotreload/hotreload/controller/rollout"
)

// In-place restarts (#25): an app that cannot reload, its config in a
// volume and in env vars (envFrom), in restart mode. The controller moves
// the pods one at a time; the sidecar restarts the app's container; the
// kubelet starts it again in the same pod.

const restartManifest = `
apiVersion: v1
kind: ConfigMap
metadata: {name: restart-config}
data: {app.yaml: "greeting: hello\n"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: env-config}
data: {LEVEL: info}
---` + restartDeploymentYAML

// restartDeploymentYAML is the app in restart mode, as docs/restart.md
// wires it; restartDeployment renames it.
const restartDeploymentYAML = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: restart-app}
spec:
  replicas: 4
  selector: {matchLabels: {app: restart-app}}
  template:
    metadata:
      labels: {app: restart-app}
      annotations: {hotreload.dev/restart: "true"}
    spec:
      automountServiceAccountToken: false
      shareProcessNamespace: true
      terminationGracePeriodSeconds: 5
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      initContainers:
        - name: hotreload
          image: ghcr.io/hotreload/hotreload:v0.1.0
          restartPolicy: Always
          args:
            - --view=ref=configmap/restart-config,source=/hotreload/source/config,dir=/etc/my-app,stable=/hotreload/stable/config
            - --view=ref=configmap/env-config
            - --pod-annotations=/hotreload/pod/annotations
            - --restart-container
            - --process-name=testapp
            - --restart-grace=5s
            - --restart-drain=3s
            - --state-file=/var/run/hotreload/state.json
          ports: [{name: metrics, containerPort: 9533}]
          startupProbe: {httpGet: {path: /-/ready, port: metrics}, periodSeconds: 1, failureThreshold: 60}
          # Not Ready while it drains the pod before a restart (--restart-drain).
          readinessProbe: {httpGet: {path: /-/ready, port: metrics}, periodSeconds: 1, failureThreshold: 1}
          securityContext:
            runAsUser: 65532
            runAsGroup: 65532
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          volumeMounts:
            - {name: config, mountPath: /etc/my-app}
            - {name: hotreload-source, mountPath: /hotreload/source/config, readOnly: true}
            - {name: hotreload-stable, mountPath: /hotreload/stable/config, readOnly: true}
            - {name: hotreload-pod, mountPath: /hotreload/pod, readOnly: true}
            - {name: hotreload-state, mountPath: /var/run/hotreload}
      containers:
` + restartAppContainer + `      volumes:
        - {name: config, emptyDir: {}}
        - {name: hotreload-source, configMap: {name: restart-config}}
        - {name: hotreload-stable, configMap: {name: restart-config-hotreload-stable, optional: true}}
        - name: hotreload-pod
          downwardAPI: {items: [{path: annotations, fieldRef: {fieldPath: metadata.annotations}}]}
        - {name: hotreload-state, emptyDir: {}}
`

// restartAppContainer is the app: the test app, which reads its config only
// when it starts, like an app that cannot reload (make compare runs it
// under Reloader too).
const restartAppContainer = `        - name: app
          image: registry.example.com/my-app:1.0.0
          args: [--listen=:8080, --dir=/etc/my-app, --token-file=, --env=LEVEL]
          envFrom: [{configMapRef: {name: env-config}}]
          readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
          securityContext:
            runAsUser: 65532
            runAsGroup: 65532
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          volumeMounts: [{name: config, mountPath: /etc/my-app, readOnly: true}]
`

// restartDeployment is restartDeploymentYAML for another app name, ConfigMap
// and number of replicas (make compare's).
func restartDeployment(app, config string, replicas int) string {
	return strings.NewReplacer("restart-app", app, "restart-config", config, "replicas: 4", "replicas: "+strconv.Itoa(replicas)).Replace(restartDeploymentYAML)
}

// restartInPlace runs the #25 scenarios; TestRollout calls it with the
// controller running.
func restartInPlace(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, []byte(restartManifest))
	pods := rollout(t, ns, "restart-app")
	before := map[string]pod{}
	for _, p := range pods {
		before[p.Metadata.Name] = p
	}
	// appRestarts is the restart count of each pod's app container.
	appRestarts := func() map[string]int {
		out := map[string]int{}
		ps, err := podsOf(ns, map[string]string{"app": "restart-app"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			c, _ := p.container("app")
			out[p.Metadata.Name] = c.RestartCount
		}
		return out
	}
	// Each change restarts each app once: after the n-th change, n
	// restarts (read from the pod's status, which the kubelet updates a
	// moment after the app serves again, hence polled).
	restarts0, changes := appRestarts(), 0
	// change edits a ConfigMap and follows the pods until each app has
	// loaded what check wants, printing how long each took, how many were
	// down at once, and whether the kubelet held a restart back.
	change := func(t *testing.T, what string, edit func(), check func(loaded) bool) {
		t.Helper()
		changes++
		var (
			mu       sync.Mutex
			maxDown  int
			backoff  = map[string]bool{}
			doneAt   = map[string]time.Duration{}
			start    = time.Now()
			stopPoll = make(chan struct{})
			wg       sync.WaitGroup
		)
		wg.Go(func() {
			for {
				select {
				case <-stopPoll:
					return
				case <-time.After(200 * time.Millisecond):
				}
				ps, err := podsOf(ns, map[string]string{"app": "restart-app"})
				if err != nil {
					continue
				}
				down := 0
				for _, p := range ps {
					c, _ := p.container("app")
					if !p.ready() {
						down++
					}
					mu.Lock()
					if c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff" {
						backoff[p.Metadata.Name] = true
					}
					mu.Unlock()
				}
				mu.Lock()
				maxDown = max(maxDown, down)
				mu.Unlock()
			}
		})
		edit()
		waitFor(t, 10*time.Minute, func() bool {
			all := true
			for _, p := range pods {
				l, err := appConfig(p.url(8080, ""))
				ok := err == nil && check(l)
				mu.Lock()
				if _, seen := doneAt[p.Metadata.Name]; ok && !seen {
					doneAt[p.Metadata.Name] = time.Since(start)
				}
				mu.Unlock()
				all = all && ok
			}
			return all
		}, func() string { return what + ": not every app loaded the change" })
		close(stopPoll)
		wg.Wait()
		var took []string
		for _, p := range pods {
			took = append(took, fmt.Sprintf("%.1fs", doneAt[p.Metadata.Name].Seconds()))
		}
		var held []string
		for p := range backoff {
			held = append(held, p)
		}
		slices.Sort(held)
		figure(t, "restart: %s: 4 pods, one at a time: each app running the change at %s after the edit; at most %d pods not Ready at once; CrashLoopBackOff seen on %v",
			what, strings.Join(took, ", "), maxDown, held)
		if maxDown > 1 {
			t.Errorf("%s: %d pods were down at once, want 1", what, maxDown)
		}
		var after map[string]int
		waitFor(t, time.Minute, func() bool {
			after = appRestarts()
			for name, n := range after {
				if n < restarts0[name]+changes {
					return false
				}
			}
			return true
		}, func() string {
			return fmt.Sprintf("%s: app restarts %v, want %d each more than %v", what, after, changes, restarts0)
		})
		for name, n := range after {
			if n != restarts0[name]+changes {
				t.Errorf("%s: %s's app restarted %d times in %d changes, want once per change", what, name, n-restarts0[name], changes)
			}
		}
		now := rollout(t, ns, "restart-app")
		for _, p := range now {
			b, ok := before[p.Metadata.Name]
			if !ok || b.Metadata.UID != p.Metadata.UID || b.Status.PodIP != p.Status.PodIP {
				t.Errorf("%s: pod %s (%s) is new or moved: pods are restarted in place, never replaced", what, p.Metadata.Name, p.Status.PodIP)
			}
		}
	}

	t.Run("config in a volume", func(t *testing.T) {
		change(t, "volume config", func() {
			patchConfigMap(t, ns, "restart-config", map[string]string{"app.yaml": "greeting: e2e-restarted\n"})
		}, func(l loaded) bool { return strings.Contains(l.Files["/etc/my-app/app.yaml"], "e2e-restarted") })
	})
	t.Run("config in env vars", func(t *testing.T) {
		change(t, "envFrom config", func() {
			patchConfigMap(t, ns, "env-config", map[string]string{"LEVEL": "debug"})
		}, func(l loaded) bool { return l.Env["LEVEL"] == "debug" })
	})
	t.Run("a second change within minutes", func(t *testing.T) {
		// The kubelet's crash-loop back-off counts these restarts too:
		// the figure says how long it held each one back.
		change(t, "envFrom config again, within a minute", func() {
			patchConfigMap(t, ns, "env-config", map[string]string{"LEVEL": "trace"})
		}, func(l loaded) bool { return l.Env["LEVEL"] == "trace" })
	})
	t.Run("events", func(t *testing.T) {
		out := mustKubectl(t, nil, "-n", ns, "get", "events", "--sort-by=.lastTimestamp", "-o", "custom-columns=REASON:.reason,OBJECT:.involvedObject.name,COUNT:.count,MESSAGE:.message")
		t.Logf("events:\n%s", out)
		for _, reason := range []string{crl.ReasonRestartAssigned, "Started"} {
			if !strings.Contains(out, reason) {
				t.Errorf("no %s Event", reason)
			}
		}
	})
}
