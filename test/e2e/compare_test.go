//go:build e2e && compare

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crl "github.com/hotreload/hotreload/controller/rollout"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubemem"
)

// Side by side with stakater Reloader (#25), in make e2e's cluster, only
// through make compare (the build tag compare): the same app in a
// Deployment of compareReplicas behind a Service, a client sending requests
// to the Service's ClusterIP throughout, and one ConfigMap edit, with the
// config in a volume and in env vars (envFrom). hotreload in restart mode
// (the controller moves the pods one at a time, the sidecar restarts the
// app's container in place); Reloader (a rolling update of the Deployment,
// which replaces every pod). Printed, not asserted: the time until every
// replica runs the new config, pods replaced, pod IPs changed, requests
// failed, and the CPU and memory of each side. Asserted: every replica ends
// on the new config, and hotreload replaced no pod.

const (
	compareApp      = "compare-app"
	compareReplicas = 6
	reloaderNS      = "compare-reloader"
	reloaderImage   = "localhost/hotreload-e2e/reloader:e2e"
	// compareTail is how long the client keeps sending after the change,
	// for the failures that come late (a replaced pod's connections).
	compareTail = 3 * time.Second
	// compareSteady is how long the client sends before the edit.
	compareSteady = 5 * time.Second
)

// compareConfig is the config both Deployments read: app.yaml in a volume at
// /etc/my-app, LEVEL in the env (envFrom), and the Service in front.
const compareConfig = `
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {app.yaml: "greeting: hello\n"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: env-config}
data: {LEVEL: info}
---
apiVersion: v1
kind: Service
metadata: {name: compare-app}
spec:
  selector: {app: compare-app}
  ports: [{name: http, port: 80, targetPort: 8080}]
`

// compareHotreload: restart mode, the Deployment of restart_test.go at
// compareReplicas.
var compareHotreload = compareConfig + "\n---" + restartDeployment("compare-app", "app-config", compareReplicas)

// compareReloader: the same app, its ConfigMap mounted as is, the
// Deployment opted in to Reloader as its README says.
var compareReloader = compareConfig + `
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: compare-app
  annotations: {reloader.stakater.com/auto: "true"}
spec:
  replicas: ` + strconv.Itoa(compareReplicas) + `
  selector: {matchLabels: {app: compare-app}}
  template:
    metadata:
      labels: {app: compare-app}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 5
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
` + restartAppContainer + `
      volumes:
        - {name: config, configMap: {name: app-config}}
`

// reloaderInstall is Reloader with RBAC of our own, written from what its
// code calls (v1.4.21: informers on ConfigMaps and Secrets in every
// namespace; get, list, update and patch of the workloads that reference
// them; a Job started from a CronJob; an Event per reload). Its defaults
// otherwise: the env-vars strategy (a rolling update), one replica, no
// leader election, metrics and /live on :9090.
const reloaderInstall = `
apiVersion: v1
kind: Namespace
metadata: {name: compare-reloader}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reloader, namespace: compare-reloader}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: compare-reloader}
rules:
  - apiGroups: [""]
    resources: [configmaps, secrets]
    verbs: [get, list, watch]
  - apiGroups: [apps]
    resources: [deployments, daemonsets, statefulsets]
    verbs: [get, list, update, patch]
  - apiGroups: [batch]
    resources: [cronjobs]
    verbs: [get, list]
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [get, list, create, delete]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: compare-reloader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: compare-reloader}
subjects: [{kind: ServiceAccount, name: reloader, namespace: compare-reloader}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: reloader, namespace: compare-reloader}
spec:
  replicas: 1
  selector: {matchLabels: {app: reloader}}
  template:
    metadata:
      labels: {app: reloader}
    spec:
      serviceAccountName: reloader
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: reloader
          image: ` + reloaderImage + `
          imagePullPolicy: Never
          ports: [{name: http, containerPort: 9090}]
          readinessProbe: {httpGet: {path: /live, port: http}, periodSeconds: 1}
          livenessProbe: {httpGet: {path: /live, port: http}, periodSeconds: 10}
          securityContext:
            runAsUser: 65534
            runAsGroup: 65534
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
`

// TestCompareReloader needs the Reloader image, which images.sh builds when
// HOTRELOAD_PEER_RELOADER names its binary (make compare does).
func TestCompareReloader(t *testing.T) {
	if os.Getenv("HOTRELOAD_PEER_RELOADER") == "" {
		e2etest.SkipOrFail(t, "no stakater Reloader to compare with: HOTRELOAD_PEER_RELOADER is not set (run make compare)")
	}
	reloader := startReloader(t)
	ctl := startController(t)

	type tool struct {
		name     string
		manifest string
		// usage reads the CPU and memory of the tool's parts.
		usage func(t *testing.T, ns string, pods []pod) toolUsage
	}
	tools := []tool{
		{"hotreload", compareHotreload, func(t *testing.T, ns string, pods []pod) toolUsage {
			leader := leaderOf(t, ctl)
			u := toolUsage{controller: containerUsage(t, controllerNS, leader.name, "controller")}
			for _, p := range pods {
				u.sidecars = append(u.sidecars, containerUsage(t, ns, p.Metadata.Name, "hotreload"))
			}
			return u
		}},
		{"Reloader", compareReloader, func(t *testing.T, _ string, _ []pod) toolUsage {
			return toolUsage{controller: containerUsage(t, reloaderNS, reloader, "reloader")}
		}},
	}
	cases := []struct {
		name string
		edit map[string]map[string]string // ConfigMap -> data
		want func(loaded) bool
	}{
		{"config in a volume", map[string]map[string]string{"app-config": {"app.yaml": "greeting: e2e-compared\n"}},
			func(l loaded) bool { return strings.Contains(l.Files["/etc/my-app/app.yaml"], "e2e-compared") }},
		{"config in env vars", map[string]map[string]string{"env-config": {"LEVEL": "debug"}},
			func(l loaded) bool { return l.Env["LEVEL"] == "debug" }},
	}
	var rows []compareRow
	for _, c := range cases {
		for _, tl := range tools {
			t.Run(c.name+"/"+tl.name, func(t *testing.T) {
				r := compareOne(t, tl.manifest, c.edit, c.want, tl.usage)
				r.tool, r.config = tl.name, strings.TrimPrefix(c.name, "config in ")
				rows = append(rows, r)
				if tl.name == "hotreload" && (r.replaced != 0 || r.ipsChanged != 0) {
					t.Errorf("hotreload replaced %d pods and changed %d pod IPs: a restart in place replaces none", r.replaced, r.ipsChanged)
				}
			})
		}
	}
	printCompare(t, rows)
}

// startReloader installs Reloader and returns its pod's name once it is
// Ready (it serves /live after its informers have started).
func startReloader(t *testing.T) string {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, reloaderNS)
		}
		for _, obj := range []string{"namespace/" + reloaderNS, "clusterrolebinding/compare-reloader", "clusterrole/compare-reloader"} {
			if _, err := kubectl(nil, "delete", obj, "--wait=true", "--timeout=120s", "--ignore-not-found"); err != nil {
				t.Errorf("delete %s: %v", obj, err)
			}
		}
	})
	mustKubectl(t, []byte(reloaderInstall), "apply", "-f", "-")
	p := onePod(t, reloaderNS, "reloader")
	// Its informers list before it serves /live; a line says they run.
	waitFor(t, podWait, func() bool {
		return strings.Contains(containerLogs(reloaderNS, p.Metadata.Name, "reloader", false), "resource type: configmaps")
	}, func() string {
		return "Reloader does not watch ConfigMaps:\n" + containerLogs(reloaderNS, p.Metadata.Name, "reloader", false)
	})
	return p.Metadata.Name
}

// usage is a container's CPU time so far and its memory now.
type usage struct {
	cpu time.Duration
	mem kubemem.Stats
}

// toolUsage is the usage of a tool's parts: its controller, and its
// sidecars (hotreload only).
type toolUsage struct {
	controller usage
	sidecars   []usage
}

// containerUsage reads a container's cgroups from the host: its CPU time
// (cpuacct on cgroup v1, cpu.stat on v2) and its memory as the kubelet
// counts it (kubemem).
func containerUsage(t *testing.T, ns, pod, container string) usage {
	t.Helper()
	pid := mainProc(t, ns, pod, container).PID
	memDir, err := kubemem.CgroupOf("/sys/fs/cgroup", pid)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := kubemem.Read(memDir)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := cgroupCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return usage{cpu: cpu, mem: mem}
}

// cgroupCPU is the CPU time of the cgroup of process pid: cgroup v1's
// cpuacct.usage (the hierarchy named for the controllers it holds, as
// /sys/fs/cgroup/cpu,cpuacct or /sys/fs/cgroup/cpuacct), else v2's cpu.stat.
func cgroupCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, err
	}
	unified := ""
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "cpuacct") {
			v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", f[1], f[2], "cpuacct.usage"))
			if err != nil {
				return 0, err
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
			return time.Duration(ns), err
		}
		if f[0] == "0" && f[1] == "" {
			unified = f[2]
		}
	}
	v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", unified, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("no cpuacct cgroup for pid %d: %w", pid, err)
	}
	for line := range strings.Lines(string(v)) {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "usage_usec "); ok {
			us, err := strconv.ParseInt(s, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no usage_usec in the cpu.stat of pid %d", pid)
}

// clusterCPU is the CPU time so far of the cluster's own processes (up.sh's
// daemons: etcd, containerd, the API server, controller-manager,
// scheduler, kubelet, kube-proxy), from their pid files: the work a change
// costs the cluster beyond the tools' own pods.
func clusterCPU(t *testing.T) time.Duration {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(os.Getenv("E2E_STATE"), "pids", "*.pid"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no pid files of the cluster's daemons under $E2E_STATE/pids (%v)", err)
	}
	var total time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
		if err != nil {
			continue // a daemon that is not running takes no CPU
		}
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th, in clock ticks (100 a second on Linux).
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		f := strings.Fields(rest)
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return total
}

// load is a client of the Service: workers that send GET /config one after
// another, each on a new connection (as many clients would, so that
// kube-proxy spreads them over the endpoints), and count what failed.
type load struct {
	mu      sync.Mutex
	sent    int
	failed  int
	reasons map[string]int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startLoad(url string, workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{reasons: map[string]int{}, cancel: cancel}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}
	for range workers {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				reason := ""
				resp, err := client.Get(url)
				switch {
				case err != nil:
					reason = failure(err)
				default:
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						reason = "status " + strconv.Itoa(resp.StatusCode)
					}
				}
				if ctx.Err() != nil {
					return // stopped meanwhile: not counted
				}
				l.mu.Lock()
				l.sent++
				if reason != "" {
					l.failed++
					l.reasons[reason]++
				}
				l.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	return l
}

// failure names why a request failed, in a few words.
func failure(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to host"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}

// snapshot returns the counts so far.
func (l *load) snapshot() (sent, failed int, reasons map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	reasons = map[string]int{}
	for k, v := range l.reasons {
		reasons[k] = v
	}
	return l.sent, l.failed, reasons
}

func (l *load) stop() { l.cancel(); l.wg.Wait() }

// compareRow is one line of the table.
type compareRow struct {
	tool, config         string
	allNew               time.Duration // the edit to every replica Ready on the new config
	oldGone              time.Duration // the edit to no pod of before the edit left
	replaced, ipsChanged int
	restartsInPlace      int // app container restarts, all pods
	sent, failed         int // requests from the edit to compareTail after the change
	failedBefore         int // requests that failed in compareSteady before the edit
	reasons              map[string]int
	before, after        toolUsage
	clusterCPU           time.Duration // the cluster's daemons, above their rate before the edit
}

// compareOne deploys manifest in a namespace of its own, sends requests
// through its Service, makes the edit, follows the pods until every
// replica runs what want checks and no pod of before the edit is left, and
// returns what it measured.
func compareOne(t *testing.T, manifest string, edit map[string]map[string]string, want func(loaded) bool, read func(*testing.T, string, []pod) toolUsage) compareRow {
	ns := namespace(t)
	apply(t, ns, []byte(manifest))
	pods := rollout(t, ns, compareApp)
	if len(pods) != compareReplicas {
		t.Fatalf("%d pods, want %d", len(pods), compareReplicas)
	}
	if strings.Contains(manifest, "hotreload.dev/restart") {
		// The controller has adopted every pod before the edit: it names
		// the revision of the volume's source each runs. (An env source's
		// revision is named only once it changes.)
		waitFor(t, nudgeWait, func() bool {
			ps, err := podsOf(ns, map[string]string{"app": compareApp})
			if err != nil {
				return false
			}
			for _, p := range ps {
				revs := crl.Revisions(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: p.Metadata.Annotations}})
				if revs["configmap/app-config"] == "" {
					return false
				}
			}
			return true
		}, func() string { return "the controller has not named the revision of configmap/app-config on every pod" })
	}
	uids, ips := map[string]bool{}, map[string]bool{}
	restarts0 := 0
	for _, p := range pods {
		uids[p.Metadata.UID] = true
		ips[p.Status.PodIP] = true
		c, _ := p.container("app")
		restarts0 += c.RestartCount
	}

	l := startLoad(serviceURL(t, ns, compareApp, 80, "/config"), 2)
	defer l.stop()
	// The cluster's CPU while nothing changes, to tell what the change
	// costs it from what it spends anyway.
	steady, idle0 := time.Now(), clusterCPU(t)
	time.Sleep(compareSteady)
	var r compareRow
	var sent0 int
	sent0, r.failedBefore, _ = l.snapshot()
	r.before = read(t, ns, pods)
	cluster0 := clusterCPU(t)
	idleRate := float64(cluster0-idle0) / float64(time.Since(steady))

	start := time.Now()
	for cm, data := range edit {
		patchConfigMap(t, ns, cm, data)
	}
	cs := k8sClient(t)
	var last string
	waitFor(t, 10*time.Minute, func() bool {
		list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + compareApp})
		if err != nil {
			last = err.Error()
			return false
		}
		var live []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != compareReplicas {
			last = fmt.Sprintf("%d pods not terminating, want %d", len(live), compareReplicas)
			return false
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		onNew := 0
		for _, p := range live {
			wg.Go(func() {
				ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
					return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
				})
				if !ready || p.Status.PodIP == "" {
					return
				}
				cfg, err := appConfig(fmt.Sprintf("http://%s:%d", p.Status.PodIP, testAppPort))
				if err == nil && want(cfg) {
					mu.Lock()
					onNew++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if onNew != compareReplicas {
			last = fmt.Sprintf("%d of %d replicas Ready on the new config", onNew, compareReplicas)
			return false
		}
		if r.allNew == 0 {
			r.allNew = time.Since(start)
		}
		if len(list.Items) != compareReplicas {
			last = fmt.Sprintf("every replica on the new config; %d pods of before the edit still terminating", len(list.Items)-compareReplicas)
			return false
		}
		r.oldGone = time.Since(start)
		return true
	}, func() string { return "not every replica runs the new config: " + last })
	time.Sleep(compareTail)
	r.clusterCPU = clusterCPU(t) - cluster0 - time.Duration(idleRate*float64(time.Since(start)))
	sent1, failed1, reasons := l.snapshot()
	l.stop()
	r.sent, r.failed, r.reasons = sent1-sent0, failed1-r.failedBefore, reasons

	after := rollout(t, ns, compareApp)
	r.after = read(t, ns, after)
	for _, p := range after {
		if !uids[p.Metadata.UID] {
			r.replaced++
		}
		if !ips[p.Status.PodIP] {
			r.ipsChanged++
		}
		c, _ := p.container("app")
		r.restartsInPlace += c.RestartCount
		if lc, err := appConfig(p.url(testAppPort, "")); err != nil || !want(lc) {
			t.Errorf("%s does not run the new config: %+v, %v", p.Metadata.Name, lc, err)
		}
	}
	if r.replaced == 0 {
		r.restartsInPlace -= restarts0
	}
	return r
}

// printCompare prints the table, a figure line per row, and what each
// row's figures are made of.
func printCompare(t *testing.T, rows []compareRow) {
	t.Helper()
	figure(t, "compare: %d replicas behind a Service, one ConfigMap edit, a client sending GET to the ClusterIP throughout (2 workers, a new connection each)", compareReplicas)
	figure(t, "compare: %-9s %-7s %8s %8s %8s %6s %8s %-13s %-21s %-24s %8s",
		"tool", "config", "all new", "old gone", "replaced", "new IP", "restarts", "failed/sent", "controller CPU, WS", "sidecars CPU, WS (max)", "cluster")
	for _, r := range rows {
		side := "-"
		if n := len(r.after.sidecars); n > 0 {
			var cpu time.Duration
			var ws uint64
			for i, s := range r.after.sidecars {
				if i < len(r.before.sidecars) {
					cpu += s.cpu - r.before.sidecars[i].cpu
				}
				ws = max(ws, s.mem.WorkingSet)
			}
			side = fmt.Sprintf("%d: %dms, %s MiB", n, cpu.Milliseconds(), kubemem.MiB(ws))
		}
		figure(t, "compare: %-9s %-7s %7.1fs %7.1fs %5d/%d %6d %8d %-13s %-21s %-24s %6dms",
			r.tool, r.config, r.allNew.Seconds(), r.oldGone.Seconds(), r.replaced, compareReplicas, r.ipsChanged, r.restartsInPlace,
			fmt.Sprintf("%d/%d", r.failed, r.sent),
			fmt.Sprintf("%dms, %s MiB", (r.after.controller.cpu-r.before.controller.cpu).Milliseconds(), kubemem.MiB(r.after.controller.mem.WorkingSet)),
			side, r.clusterCPU.Milliseconds())
	}
	for _, r := range rows {
		var reasons []string
		for k, v := range r.reasons {
			reasons = append(reasons, fmt.Sprintf("%s %d", k, v))
		}
		slices.Sort(reasons)
		figure(t, "compare: %s, %s: failed requests by reason: [%s] (%d failed in the %s before the edit); controller working set %s MiB before the edit",
			r.tool, r.config, strings.Join(reasons, ", "), r.failedBefore, compareSteady, kubemem.MiB(r.before.controller.mem.WorkingSet))
	}
	figure(t, "compare: all new = the edit to every replica Ready and serving the new config; old gone = to no pod of before the edit left; CPU = used from just before the edit to %s after old gone; WS = cgroup working set after; cluster = CPU of etcd, containerd, the API server, controller-manager, scheduler, kubelet and kube-proxy meanwhile, less what they used at the rate of the %s before the edit", compareTail, compareSteady)
}

// configmapReloadImage is configmap-reload FROM scratch, which images.sh
// builds when HOTRELOAD_PEER_CONFIGMAP_RELOAD names its binary.
const configmapReloadImage = "localhost/hotreload-e2e/configmap-reload:e2e"

// configmapReload is configmap-reload in the test pod in hotreload's place:
// the same --web.listen-address, --webhook-url and --volume-dir flags, and
// no probes (it serves /metrics only).
var configmapReload = memTool{name: "configmap-reload", spec: func(c object) {
	c["name"], c["image"] = "configmap-reload", configmapReloadImage
	delete(c, "readinessProbe")
	delete(c, "livenessProbe")
}}

// TestCompareMemory is TestSidecarMemory with configmap-reload's pods
// beside hotreload's, in the same run (make compare-memory).
func TestCompareMemory(t *testing.T) {
	if os.Getenv("HOTRELOAD_PEER_CONFIGMAP_RELOAD") == "" {
		e2etest.SkipOrFail(t, "no configmap-reload to compare with: HOTRELOAD_PEER_CONFIGMAP_RELOAD is not set (run make compare-memory)")
	}
	measureMemory(t, configmapReload)
}
