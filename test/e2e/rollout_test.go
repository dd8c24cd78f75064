//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hotreload/hotreload/controller"
	crl "github.com/hotreload/hotreload/controller/rollout"
	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/kubemem"
)

// Rollouts (#27) and in-place restarts (#25) in the real cluster: the
// controller as examples/controller ships it, with its CRD; workloads of 10
// replicas; the kubelet at its default syncFrequency (1m), so that a design
// that only chose which pods to nudge would fail the "at most the first
// step's pods ever saw it" checks below, which watch for two periodic syncs.

const (
	rolloutApp   = "rollout-app"
	rolloutCM    = "rollout-app-config"
	rolloutRef   = "configmap/" + rolloutCM
	rolloutWaitT = 5 * time.Minute
	// twoSyncs covers two of the kubelet's periodic syncs of every pod:
	// syncFrequency 1m plus its jitter, twice.
	twoSyncs = 3 * time.Minute
)

// crClient is a client of ConfigRollouts for the tests.
func crClient(t *testing.T) *crl.Client {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return crl.NewClient(d)
}

// startRolloutController applies the CRD and the controller.
func startRolloutController(t *testing.T) []ctlReplica {
	t.Helper()
	mustKubectl(t, nil, "apply", "-f", "../../examples/controller/crd.yaml")
	mustKubectl(t, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/configrollouts.hotreload.dev")
	return startController(t)
}

// sidecarReport is what GET /-/content of a pod's sidecar says about ref.
func sidecarReport(p pod, ref string) (crl.Report, error) {
	var r crl.Report
	code, body, err := binary.Get(p.url(hotreloadPort, "/-/content"))
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return r, err
	}
	var c struct {
		Views []struct {
			Ref string `json:"ref"`
			crl.Report
		} `json:"views"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		return r, err
	}
	for _, v := range c.Views {
		if v.Ref == ref {
			return v.Report, nil
		}
	}
	return r, fmt.Errorf("no view of %s", ref)
}

// waitRolloutPhase waits until the ConfigRollout is in phase (and, if
// stable is set, has that stable revision).
func waitRolloutPhase(t *testing.T, ns, name, phase, stable string, timeout time.Duration) *crl.ConfigRollout {
	t.Helper()
	c := crClient(t)
	var (
		r   *crl.ConfigRollout
		err error
	)
	waitFor(t, timeout, func() bool {
		r, err = c.Get(context.Background(), ns, name)
		return err == nil && r.Status.Phase == phase && (stable == "" || r.Status.StableRevision == stable)
	}, func() string {
		if r == nil {
			return fmt.Sprintf("configrollout %s/%s: %v", ns, name, err)
		}
		return fmt.Sprintf("configrollout %s/%s is %s (%s), stable %s; want %s %s", ns, name, r.Status.Phase, r.Status.Message, r.Status.StableRevision, phase, stable)
	})
	return r
}

// revisionsWatch records, from a watch of the namespace's pods, every pod
// ever annotated with each revision of ref, until the test ends.
type revisionsWatch struct {
	mu   sync.Mutex
	ever map[string]map[string]bool // revision -> pods
	now  map[string]string          // pod -> revision
}

func watchRevisions(t *testing.T, ns, ref string) *revisionsWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := k8sClient(t).CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rw := &revisionsWatch{ever: map[string]map[string]bool{}, now: map[string]string{}}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rev := crl.Revisions(p)[ref]
			rw.mu.Lock()
			rw.now[p.Name] = rev
			if rw.ever[rev] == nil {
				rw.ever[rev] = map[string]bool{}
			}
			rw.ever[rev][p.Name] = true
			rw.mu.Unlock()
		}
	}()
	return rw
}

func (rw *revisionsWatch) podsEver(rev string) []string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	var out []string
	for p := range rw.ever[rev] {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// apiRequests sums hotreload_controller_api_requests_total by verb and
// resource at a replica.
func apiRequests(t *testing.T, r ctlReplica) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range scrape(t, r.metrics())["hotreload_controller_api_requests_total"].GetMetric() {
		out[label(m, "verb")+" "+label(m, "resource")] += m.GetCounter().GetValue()
	}
	return out
}

// requestsPerPodStep prints the API requests the leader made between two
// counts, per pod and step, by kind, leaving out the informers' watches.
func requestsPerPodStep(t *testing.T, what string, before, after map[string]float64, pods, steps int) {
	t.Helper()
	var kinds []string
	total := 0.0
	for k, v := range after {
		d := v - before[k]
		if d <= 0 || strings.HasPrefix(k, "watch ") {
			continue
		}
		total += d
		kinds = append(kinds, fmt.Sprintf("%s %.0f", k, d))
	}
	sort.Strings(kinds)
	figure(t, "rollout: %s: %.0f API requests for %d pods in %d steps: %.2f per pod per step (%s)", what, total, pods, steps, total/float64(pods*steps), strings.Join(kinds, ", "))
}

// appConfigs reads what each pod's test app loaded.
func appConfigs(pods []pod) map[string]loaded {
	out := map[string]loaded{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			l, err := appConfig(p.url(8080, ""))
			if err == nil {
				mu.Lock()
				out[p.Metadata.Name] = l
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

func restarts(p pod) int {
	n := 0
	for _, c := range slices.Concat(p.Status.ContainerStatuses, p.Status.InitContainerStatuses) {
		n += c.RestartCount
	}
	return n
}

// TestRollout runs the shipped controller (examples/controller) beside the
// parallel tests, once TestController, which installs the same Deployment,
// is done (Go runs every sequential test first). The controller touches
// only the pods that opt in (hotreload.dev/nudge, rollout or restart): no
// parallel test's pods do, and TestChartInstall, whose workload does, is
// sequential. Its figures are printed, not asserted: the suite's load
// moves them.
func TestRollout(t *testing.T) {
	t.Parallel()
	replicas := startRolloutController(t)

	// setup applies examples/controller/rollout.yaml as shipped, waits
	// until its 10 pods run and name the stable revision, and returns them
	// with the stable revision.
	setup := func(t *testing.T, ns string) ([]pod, string) {
		t.Helper()
		mustKubectl(t, nil, "-n", ns, "apply", "-f", "../../examples/controller/rollout.yaml")
		pods := rollout(t, ns, rolloutApp)
		if len(pods) != 10 {
			t.Fatalf("%d pods, want 10", len(pods))
		}
		r := waitRolloutPhase(t, ns, rolloutCM, crl.PhaseHealthy, "", rolloutWaitT)
		stable := r.Status.StableRevision
		waitFor(t, nudgeWait, func() bool {
			ps, err := podsOf(ns, map[string]string{"app.kubernetes.io/name": rolloutApp})
			if err != nil {
				return false
			}
			for _, p := range ps {
				if crl.Revisions(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: p.Metadata.Annotations}})[rolloutRef] != stable {
					return false
				}
			}
			return true
		}, func() string { return "the pods do not all name the stable revision " + stable })
		for _, p := range pods {
			waitLoaded(t, nudgeWait, p.url(8080, ""), "/etc/my-app/app.yaml", "greeting: hello")
		}
		return pods, stable
	}
	edit := func(t *testing.T, ns, greeting string) string {
		t.Helper()
		patchConfigMap(t, ns, rolloutCM, map[string]string{"app.yaml": "greeting: " + greeting + "\n"})
		return resourceVersion(t, ns, "configmap", rolloutCM)
	}
	// timeline prints the rollout's status as it changes until it ends.
	timeline := func(t *testing.T, ns string, start time.Time, until func(*crl.ConfigRollout) bool) *crl.ConfigRollout {
		t.Helper()
		c := crClient(t)
		last := ""
		var r *crl.ConfigRollout
		waitFor(t, rolloutWaitT, func() bool {
			var err error
			if r, err = c.Get(context.Background(), ns, rolloutCM); err != nil {
				return false
			}
			s := fmt.Sprintf("%s step %d/%d updated %d healthy %d", r.Status.Phase, r.Status.Step, r.Status.Steps, r.Status.Updated, r.Status.Healthy)
			if s != last {
				figure(t, "rollout: timeline %6.2fs %s", time.Since(start).Seconds(), s)
				last = s
			}
			return until(r)
		}, func() string { return "the rollout did not end: " + last })
		return r
	}

	// First, alone: its API requests per pod per step count only its own.
	t.Run("a good edit in three steps", func(t *testing.T) {
		ns := namespace(t)
		pods, _ := setup(t, ns)
		leader := leaderOf(t, replicas)
		before := apiRequests(t, leader)
		start := time.Now()
		rev := edit(t, ns, "e2e-good")
		r := timeline(t, ns, start, func(r *crl.ConfigRollout) bool {
			return r.Status.Phase == crl.PhaseHealthy && r.Status.StableRevision == rev || r.Status.Phase == crl.PhaseAborted
		})
		if r.Status.Phase != crl.PhaseHealthy {
			t.Fatalf("phase %s: %s", r.Status.Phase, r.Status.Message)
		}
		figure(t, "rollout: a good edit, 10 pods, steps 10%%/50%%/100%%, bake 10s: promoted %.1fs after the edit", time.Since(start).Seconds())
		requestsPerPodStep(t, "a good edit", before, apiRequests(t, leader), 10, 3)
		for _, p := range pods {
			waitLoaded(t, nudgeWait, p.url(8080, ""), "/etc/my-app/app.yaml", "greeting: e2e-good")
		}
		after := rollout(t, ns, rolloutApp)
		if !slices.Equal(names(after), names(pods)) {
			t.Errorf("pods %v became %v: a rollout replaces no pod", names(pods), names(after))
		}
		for _, p := range after {
			if n := restarts(p); n != 0 {
				t.Errorf("%s: %d container restarts, want 0", p.Metadata.Name, n)
			}
		}
	})

	// Then the rollouts that wait for the kubelet's syncs (the bad edits,
	// the restarts) run beside these, which run in turn: each one's
	// disturbance (a pod deleted, the leader killed) is what the others
	// must survive too. The scale test comes last, when they are done.
	t.Run("in turn", func(t *testing.T) {
		t.Parallel()
		// disturb runs a good edit and, once the rollout reaches step, does
		// something to it; the rollout must end as want says.
		disturb := func(t *testing.T, step int, do func(t *testing.T, ns string, pods []pod, rev string), wantPhase string) {
			ns := namespace(t)
			pods, stable := setup(t, ns)
			rev := edit(t, ns, "e2e-disturbed")
			start := time.Now()
			timeline(t, ns, start, func(r *crl.ConfigRollout) bool {
				return r.Status.Revision == rev && r.Status.Step >= step && r.Status.Updated > 0 || r.Status.Phase == crl.PhaseHealthy && r.Status.StableRevision == rev
			})
			do(t, ns, pods, rev)
			want := rev
			if wantPhase == crl.PhaseAborted {
				want = stable
			}
			r := timeline(t, ns, start, func(r *crl.ConfigRollout) bool {
				return r.Status.Phase == wantPhase && r.Status.StableRevision == want
			})
			figure(t, "rollout: %s: ended %s %.1fs after the edit (%s)", t.Name(), r.Status.Phase, time.Since(start).Seconds(), r.Status.Message)
			waitFor(t, nudgeWait, func() bool {
				ps, err := podsOf(ns, map[string]string{"app.kubernetes.io/name": rolloutApp})
				if err != nil {
					return false
				}
				for _, p := range ps {
					if p.Metadata.DeletionTimestamp != nil {
						continue
					}
					if rep, err := sidecarReport(p, rolloutRef); err != nil || rep.Running != want || rep.Result != crl.ResultApplied {
						return false
					}
				}
				return true
			}, func() string { return "not every pod runs " + want })
		}
		t.Run("during a rollout: a pod deleted", func(t *testing.T) {
			disturb(t, 1, func(t *testing.T, ns string, pods []pod, rev string) {
				for _, p := range pods {
					if p, err := getPod(ns, p.Metadata.Name); err == nil && crl.Revisions(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: p.Metadata.Annotations}})[rolloutRef] == rev {
						mustKubectl(t, nil, "-n", ns, "delete", "pod", p.Metadata.Name, "--wait=false")
						return
					}
				}
				t.Fatal("no pod on the candidate to delete")
			}, crl.PhaseHealthy)
		})
		t.Run("during a rollout: scaled up", func(t *testing.T) {
			disturb(t, 2, func(t *testing.T, ns string, _ []pod, _ string) {
				mustKubectl(t, nil, "-n", ns, "scale", "deployment", rolloutApp, "--replicas=13")
			}, crl.PhaseHealthy)
		})
		t.Run("during a rollout: the leader killed", func(t *testing.T) {
			disturb(t, 2, func(t *testing.T, _ string, _ []pod, _ string) {
				old := leaderOf(t, replicas)
				mustKubectl(t, nil, "-n", controllerNS, "delete", "pod", old.name, "--grace-period=0", "--force", "--wait=false")
				var holder string
				waitFor(t, nudgeWait, func() bool { holder = leaseHolder(t); return holder != "" && holder != old.name }, func() string { return "no new leader" })
				replicas = []ctlReplica{{holder, waitReady(t, controllerNS, holder).Status.PodIP}}
			}, crl.PhaseHealthy)
		})
		t.Run("during a rollout: an app container killed", func(t *testing.T) {
			disturb(t, 1, func(t *testing.T, ns string, pods []pod, rev string) {
				for _, p := range pods {
					if p, err := getPod(ns, p.Metadata.Name); err == nil && crl.Revisions(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: p.Metadata.Annotations}})[rolloutRef] == rev {
						kill(t, mainProc(t, ns, p.Metadata.Name, "app"), syscall.SIGKILL)
						return
					}
				}
				t.Fatal("no pod on the candidate")
			}, crl.PhaseAborted)
		})

		t.Run("policy validation", func(t *testing.T) {
			ns := namespace(t)
			for _, c := range []struct{ spec, err string }{
				{`{source: {kind: ConfigMap, name: a}, steps: ["10%", "50%"]}`, `the last step must be "100%"`},
				{`{source: {kind: ConfigMap, name: a}, steps: ["110%"]}`, "should match"},
				{`{source: {kind: Pod, name: a}, steps: ["100%"]}`, "Unsupported value"},
				{`{source: {kind: ConfigMap, name: a}, steps: ["100%"], bakeTime: 10}`, "bakeTime"},
				{`{source: {kind: ConfigMap, name: a}, steps: ["100%"], analysis: {prometheus: {address: "http://p:9090", query: q}}}`, "give max, min or both"},
			} {
				manifest := "apiVersion: hotreload.dev/v1alpha1\nkind: ConfigRollout\nmetadata: {name: bad}\nspec: " + c.spec + "\n"
				_, err := kubectl([]byte(manifest), "-n", ns, "apply", "--dry-run=server", "-f", "-")
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("%s: %v, want refused with %q", c.spec, err, c.err)
				}
			}
		})

		t.Run("scale", func(t *testing.T) {
			rolloutScale(t, leaderOf(t, replicas))
		})
	})

	// The app accepts the edit, loads it, and its readiness probe fails:
	// aborted at step 1, and no other pod ever loads it, over two of the
	// kubelet's periodic syncs.
	t.Run("a bad edit that fails the readiness probe", func(t *testing.T) {
		t.Parallel()
		ns := namespace(t)
		pods, stable := setup(t, ns)
		rw := watchRevisions(t, ns, rolloutRef)
		seen := map[string]bool{}
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			for ctx.Err() == nil {
				for name, l := range appConfigs(pods) {
					for _, content := range l.Files {
						if strings.Contains(content, "e2e-unhealthy") {
							mu.Lock()
							seen[name] = true
							mu.Unlock()
						}
					}
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
		defer func() { cancel(); wg.Wait() }()
		bad := edit(t, ns, "e2e-unhealthy")
		r := waitRolloutPhase(t, ns, rolloutCM, crl.PhaseAborted, "", rolloutWaitT)
		aborted := time.Now()
		if !strings.Contains(r.Status.Message, "is not Ready") {
			t.Errorf("abort message %q, want the pod that turned NotReady", r.Status.Message)
		}
		// Every pod serves stable again: the figure. Waited for up to a
		// periodic kubelet sync: the pod's annotation patch makes the
		// kubelet refresh its downwardAPI volume at once, but .ci/run once
		// saw it take over 30 s under the whole suite's load.
		waitFor(t, syncWait, func() bool {
			for _, l := range appConfigs(pods) {
				for _, c := range l.Files {
					if strings.Contains(c, "e2e-unhealthy") {
						return false
					}
				}
			}
			return true
		}, func() string { return "a pod still serves the bad edit" })
		figure(t, "rollout: abort (seen by the test) to every pod serving stable: %.2fs (goal under 2s for 10 pods)", time.Since(aborted).Seconds())
		time.Sleep(twoSyncs - time.Since(aborted))
		mu.Lock()
		var loaded []string
		for n := range seen {
			loaded = append(loaded, n)
		}
		mu.Unlock()
		if len(loaded) > 1 {
			t.Errorf("pods that ever loaded the bad edit: %v, want at most the first step's one", loaded)
		}
		if got := rw.podsEver(bad); len(got) > 1 {
			t.Errorf("pods ever annotated with the bad revision %s: %v, want at most one", bad, got)
		}
		for _, p := range rollout(t, ns, rolloutApp) {
			if rev := rw.now[p.Metadata.Name]; rev != stable {
				t.Errorf("%s names %s, want stable %s", p.Metadata.Name, rev, stable)
			}
		}
	})

	t.Run("a bad edit the app refuses", func(t *testing.T) {
		t.Parallel()
		prometheusRefuses(t)
	})

	t.Run("restart in place", func(t *testing.T) {
		t.Parallel()
		restartInPlace(t)
	})
}

// prometheusRefuses: Prometheus in 10 replicas, its config a view; an
// invalid config is refused by Prometheus's /-/reload (500) on the first
// step's pod, the rollout aborts, and no other pod's directory ever holds
// it, over two of the kubelet's periodic syncs.
func prometheusRefuses(t *testing.T) {
	ns := namespace(t)
	b, err := os.ReadFile("../../examples/controller/rollout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, b)
	for _, o := range objs {
		switch o["kind"] {
		case "ConfigMap":
			o["data"] = object{"prometheus.yml": "global:\n  scrape_interval: 30s\n"}
		case "Deployment":
			spec := dig[object](o, "spec", "template", "spec")
			app := spec["containers"].([]any)[0].(object)
			app["image"] = "quay.io/prometheus/prometheus:v3.5.0"
			app["args"] = []any{"--config.file=/etc/my-app/prometheus.yml", "--web.enable-lifecycle", "--storage.tsdb.path=/prometheus"}
			app["ports"] = []any{object{"name": "http", "containerPort": 9090}}
			app["readinessProbe"] = object{"httpGet": object{"path": "/-/ready", "port": "http"}, "periodSeconds": 2}
			app["volumeMounts"] = append(app["volumeMounts"].([]any), object{"name": "data", "mountPath": "/prometheus"})
			spec["volumes"] = append(spec["volumes"].([]any), object{"name": "data", "emptyDir": object{}})
			sidecar := spec["initContainers"].([]any)[0].(object)
			var args []any
			for _, a := range sidecar["args"].([]any) {
				if s := a.(string); strings.HasPrefix(s, "--webhook-url=") {
					a = "--webhook-url=http://127.0.0.1:9090/-/reload"
				}
				args = append(args, a)
			}
			sidecar["args"] = args
		}
	}
	mustKubectl(t, encode(t, objs), "-n", ns, "apply", "-f", "-")
	// The image name of the examples: load-images.sh tags it.
	pods := rollout(t, ns, rolloutApp)
	stable := waitRolloutPhase(t, ns, rolloutCM, crl.PhaseHealthy, "", rolloutWaitT).Status.StableRevision
	rw := watchRevisions(t, ns, rolloutRef)
	// Every pod's sidecar, polled: which revision its directory ever held.
	held := map[string]map[string]bool{}
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, p := range pods {
				if r, err := sidecarReport(p, rolloutRef); err == nil {
					mu.Lock()
					if held[r.Running] == nil {
						held[r.Running] = map[string]bool{}
					}
					held[r.Running][p.Metadata.Name] = true
					mu.Unlock()
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	patchConfigMap(t, ns, rolloutCM, map[string]string{"prometheus.yml": "global:\n  scrape_interval: e2e-invalid\n"})
	bad := resourceVersion(t, ns, "configmap", rolloutCM)
	r := waitRolloutPhase(t, ns, rolloutCM, crl.PhaseAborted, "", rolloutWaitT)
	aborted := time.Now()
	if !strings.Contains(r.Status.Message, "rejected revision "+bad) {
		t.Errorf("abort message %q, want the pod that rejected %s", r.Status.Message, bad)
	}
	// Up to a periodic kubelet sync, as in the readiness case.
	waitFor(t, syncWait, func() bool {
		for _, p := range pods {
			if rep, err := sidecarReport(p, rolloutRef); err != nil || rep.Running != stable || rep.Want != stable {
				return false
			}
		}
		return true
	}, func() string { return "not every pod is back on stable" })
	figure(t, "rollout: Prometheus refused the edit: abort (seen by the test) to every sidecar reporting stable: %.2fs", time.Since(aborted).Seconds())
	time.Sleep(twoSyncs - time.Since(aborted))
	mu.Lock()
	defer mu.Unlock()
	if got := rw.podsEver(bad); len(got) > 1 {
		t.Errorf("pods ever annotated with %s: %v, want at most the first step's one", bad, got)
	}
	// The first step's pod held it (its app must read it to refuse it);
	// no pod the controller did not move to it ever did.
	for p := range held[bad] {
		if !slices.Contains(rw.podsEver(bad), p) {
			t.Errorf("pod %s's directory held the refused revision, but the controller never moved it there (pods moved: %v)", p, rw.podsEver(bad))
		}
	}
	for _, p := range pods {
		if rep, err := sidecarReport(p, rolloutRef); err != nil || rep.Running != stable {
			t.Errorf("%s runs %+v (%v), want stable %s", p.Metadata.Name, rep, err, stable)
		}
	}
}

// rolloutScale: 2000 pods bound to a node that does not exist use one
// ConfigMap under a 3-step policy; the test answers their /-/content (they
// have no sidecar) through the controller's test-only --test.content-url,
// from what each pod's annotation names. Printed: the rollout's time and
// the controller's memory.
func rolloutScale(t *testing.T, leader ctlReplica) {
	cs := k8sClient(t)
	ctx := context.Background()
	ns := namespace(t)
	ghost := ghostNode(t, cs)
	// The stub: what each pod's annotation names, applied.
	var mu sync.Mutex
	want := map[string]string{}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				mu.Lock()
				want[p.Name] = crl.Revisions(p)["configmap/shared"]
				mu.Unlock()
			}
		}
	}()
	ln, err := net.Listen("tcp", "10.244.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		name := filepath.Base(r.URL.Path)
		mu.Lock()
		rev := want[name]
		mu.Unlock()
		fmt.Fprintf(rw, `{"views":[{"ref":"configmap/shared","want":%q,"running":%q,"result":"applied","at":%q}]}`, rev, rev, time.Now().UTC().Format(time.RFC3339))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/{namespace}/{pod}"
	mustKubectl(t, nil, "-n", controllerNS, "set", "env", "deployment/"+controllerName, "HOTRELOAD_TEST_CONTENT_URL="+url)
	defer kubectl(nil, "-n", controllerNS, "set", "env", "deployment/"+controllerName, "HOTRELOAD_TEST_CONTENT_URL-")
	var ctl []ctlReplica
	for _, p := range rollout(t, controllerNS, controllerName) {
		ctl = append(ctl, ctlReplica{p.Metadata.Name, p.Status.PodIP})
	}
	waitFor(t, podWait, func() bool { _, ok := leading(ctl); return ok }, func() string { return "no replica leads" })
	leader = leaderOf(t, ctl)
	rss := func() float64 {
		v, _, err := metric(leader.metrics(), "process_resident_memory_bytes", nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ws0 := workingSet(t, controllerNS, leader.name, "controller")
	rss0 := rss()

	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	no, yes := false, true
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range scalePods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ghost-%04d", i), Annotations: map[string]string{controller.AnnotationRollout: "true"}},
				Spec: corev1.PodSpec{
					NodeName: ghost, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, AutomountServiceAccountToken: &no,
					Containers: []corev1.Container{{Name: "app", Image: "localhost/hotreload-e2e/pause:e2e"}},
					Volumes: []corev1.Volume{
						{Name: "source", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}},
						{Name: "stable", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared" + crl.StableSuffix}, Optional: &yes}}},
					},
				},
			}
			created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			created.Status.Phase = corev1.PodRunning
			created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	})
	c := crClient(t)
	if _, err := c.Create(ctx, &crl.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Spec: crl.Spec{Source: crl.SourceRef{Kind: "ConfigMap", Name: "shared"}, Steps: []string{"10%", "50%", "100%"}, ProgressDeadline: "10m"}}); err != nil {
		t.Fatal(err)
	}
	// Adoption: every pod named with the stable revision.
	startAdopt := time.Now()
	stable := waitRolloutPhase(t, ns, "shared", crl.PhaseHealthy, "", 10*time.Minute).Status.StableRevision
	waitFor(t, 10*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range want {
			if r == stable {
				n++
			}
		}
		return n == scalePods
	}, func() string { return "not every pod names the stable revision" })
	figure(t, "rollout: scale: %d pods adopted (each annotated with the stable revision) in %.1fs", scalePods, time.Since(startAdopt).Seconds())
	ws1, rss1 := workingSet(t, controllerNS, leader.name, "controller"), rss()
	before := apiRequests(t, leader)

	start := time.Now()
	cm, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "shared", types.MergePatchType, []byte(`{"data":{"v":"1"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRolloutPhase(t, ns, "shared", crl.PhaseHealthy, cm.ResourceVersion, 20*time.Minute)
	took := time.Since(start)
	ws2, rss2 := workingSet(t, controllerNS, leader.name, "controller"), rss()
	figure(t, "rollout: scale: %d pods, steps 10%%/50%%/100%%, bake 0s: promoted %.1fs after the edit (%s; default --qps 50 --burst 100)", scalePods, took.Seconds(), r.Status.Message)
	requestsPerPodStep(t, "scale", before, apiRequests(t, leader), scalePods, 3)
	figure(t, "rollout: scale: controller working set %.1f / %.1f / %.1f MiB, RSS %.1f / %.1f / %.1f MiB (before the pods; with %d pods adopted; after the rollout)",
		ws0/(1<<20), ws1/(1<<20), ws2/(1<<20), rss0/(1<<20), rss1/(1<<20), rss2/(1<<20), scalePods)
}

// workingSet is a container's memory as the kubelet counts it (cgroup
// usage less inactive file pages), read from the host's memory cgroup.
func workingSet(t *testing.T, ns, pod, container string) float64 {
	t.Helper()
	dir, err := kubemem.CgroupOf("/sys/fs/cgroup", mainProc(t, ns, pod, container).PID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kubemem.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return float64(st.WorkingSet)
}
