//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/test/support/poll"
)

// hotreload-controller (examples/controller) in the real cluster: the
// shipped manifests as they are, two replicas of the Deployment, which find
// the API server through the kubernetes Service (kube-proxy) and act through
// their ServiceAccount and its RBAC; and examples/controller/workload.yaml,
// the workload that opts in.

const (
	controllerNS    = "hotreload-system"
	controllerName  = "hotreload-controller"
	controllerPort  = 9534
	scalePods       = 2000
	scaleConfigMaps = 2000
)

// k8sClient is a client of the test's own, for what kubectl would do too
// slowly (thousands of objects).
func k8sClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// ctlReplica is one running controller pod.
type ctlReplica struct{ name, ip string }

func (r ctlReplica) metrics() string {
	return fmt.Sprintf("http://%s:%d/metrics", r.ip, controllerPort)
}

// startController applies examples/controller/controller.yaml and waits
// until its Deployment has rolled out and one replica holds the Lease.
func startController(t *testing.T) []ctlReplica {
	t.Helper()
	mustKubectl(t, nil, "apply", "-f", "../../examples/controller/controller.yaml")
	// As shipped: its patches pass the admission policy that limits them
	// to the pods' hotreload.dev/ annotations.
	mustKubectl(t, nil, "apply", "-f", "../../examples/controller/admission-policy.yaml")
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, controllerNS)
		}
		// The Deployment and its pods; the namespace and the RBAC objects
		// stay, for TestExamplesDryRun may be sending the same file.
		if _, err := kubectl(nil, "-n", controllerNS, "delete", "deployment", controllerName, "--cascade=foreground", "--wait=true", "--timeout=90s"); err != nil {
			t.Errorf("delete the controller: %v", err)
		}
	})
	var replicas []ctlReplica
	for _, p := range rollout(t, controllerNS, controllerName) {
		replicas = append(replicas, ctlReplica{p.Metadata.Name, p.Status.PodIP})
	}
	if len(replicas) != 2 {
		t.Fatalf("the manifest makes %d replicas, want 2", len(replicas))
	}
	waitFor(t, podWait, func() bool { _, ok := leading(replicas); return ok }, func() string { return "no replica leads" })
	return replicas
}

// leaseHolder is the replica that holds the Lease, "" if none.
func leaseHolder(t *testing.T) string {
	out, _ := kubectl(nil, "-n", controllerNS, "get", "lease", controllerName, "-o", "jsonpath={.spec.holderIdentity}")
	return strings.TrimSpace(out)
}

// watchAnnotation sends the time of every change of the pod's nudge
// annotation, until the test ends. It watches from any resourceVersion the
// API server's cache has ("0"), and watches again when a watch ends: a watch
// from the latest one ("") waits for the cache to catch up with etcd, which
// kube-apiserver 1.34 cannot ask Debian's etcd 3.4 to report, and on a quiet
// cluster it ended after 3 s with "Too large resource version".
func watchAnnotation(t *testing.T, ns, name string) <-chan time.Time {
	t.Helper()
	pods := k8sClient(t).CoreV1().Pods(ns)
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: "0"}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan time.Time, 100)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		last := ""
		for ctx.Err() == nil {
			w, err := pods.Watch(ctx, opts)
			if err != nil {
				poll.Each(time.Second, time.Second, func() bool { return ctx.Err() != nil })
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					break // an error: watch again
				}
				if v := p.Annotations[controller.AnnotationNudged]; v != last {
					if last != "" || v != "" {
						select {
						case out <- time.Now():
						default:
						}
					}
					last = v
				}
			}
			w.Stop()
		}
	}()
	return out
}

// editGap spaces edits of one pod's volumes seconds apart, as users make
// them. It waits for no event. Seen in this cluster: edits made as soon as
// the previous one reloaded (about a second apart) each took about 1 s, with
// the controller and with TestTiming's own annotation alike; edits 3 s apart
// took 0.3-0.5 s, with or without probes on the pod.
func editGap() { time.Sleep(3 * time.Second) }

// leading is the replica whose hotreload_controller_leader is 1.
func leading(replicas []ctlReplica) (ctlReplica, bool) {
	for _, r := range replicas {
		if v, ok, err := metric(r.metrics(), "hotreload_controller_leader", nil); err == nil && ok && v == 1 {
			return r, true
		}
	}
	return ctlReplica{}, false
}

// leaderOf is the replica that leads.
func leaderOf(t *testing.T, replicas []ctlReplica) ctlReplica {
	t.Helper()
	r, ok := leading(replicas)
	if !ok {
		t.Fatalf("none of %v leads", replicas)
	}
	return r
}

// lagOf returns the sum and count of a replica's nudge lag histogram.
func lagOf(t *testing.T, r ctlReplica) (sum, count float64) {
	t.Helper()
	mf := scrape(t, r.metrics())["hotreload_controller_nudge_lag_seconds"]
	if mf == nil || len(mf.GetMetric()) != 1 {
		t.Fatalf("%s serves no hotreload_controller_nudge_lag_seconds", r.name)
	}
	h := mf.GetMetric()[0].GetHistogram()
	return h.GetSampleSum(), float64(h.GetSampleCount())
}

// optIn adds the opt-in annotation to a pod manifest.
func optIn(t *testing.T, manifest []byte) []byte {
	t.Helper()
	var o object
	if err := json.Unmarshal(manifest, &o); err != nil {
		t.Fatal(err)
	}
	meta := o["metadata"].(object)
	meta["annotations"] = object{controller.AnnotationNudge: "true"}
	b, _ := json.Marshal(o)
	return b
}

// nudgedValue is the controller's annotation on a pod, "" if none.
func nudgedValue(ns, name string) string {
	p, err := getPod(ns, name)
	if err != nil {
		return ""
	}
	return p.Metadata.Annotations[controller.AnnotationNudged]
}

func resourceVersion(t *testing.T, ns, kind, name string) string {
	t.Helper()
	return strings.TrimSpace(mustKubectl(t, nil, "-n", ns, "get", kind, name, "-o", "jsonpath={.metadata.resourceVersion}"))
}

// timeLoad patches an object with edit, and returns how long the app took
// to load want into file (by the app's own clock, on this machine).
func timeLoad(t *testing.T, p testPod, edit func(), file, want string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	edit()
	l := waitLoaded(t, timeout, p.app(), file, want)
	return l.LoadedAt.Sub(start)
}

// TestController is not parallel: Go runs it before every parallel test,
// alone, as TestTimingAnnotated, for its sub-second figures would otherwise
// measure the suite's own pods starting.
func TestController(t *testing.T) {
	// Without the controller, an edit waits for the kubelet's periodic sync:
	// TestTimingKubeletSync measures that in the same run.
	t.Run("with the controller", func(t *testing.T) {
		replicas := startController(t)
		ns := namespace(t)
		apply(t, ns, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {edit: "0"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: proj-cm}
data: {mode: "0"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: "0"}
---
apiVersion: v1
kind: Secret
metadata: {name: proj-secret}
stringData: {token: "0"}
`))
		cmPod := testPod{
			name:          "opted-in",
			volumes:       []object{configMapVolume("config", "settings")},
			mounts:        map[string]string{"config": "/etc/config"},
			hotreloadArgs: []string{"--log.level=debug"},
		}
		multiPod := testPod{
			name: "secret-and-projected",
			volumes: []object{
				{"name": "creds", "secret": object{"secretName": "creds"}},
				{"name": "projected", "projected": object{"sources": []any{
					object{"configMap": object{"name": "proj-cm"}},
					object{"secret": object{"name": "proj-secret"}},
				}}},
			},
			mounts: map[string]string{"creds": "/etc/creds", "projected": "/etc/proj"},
		}
		bystander := testPod{
			name:    "bystander",
			volumes: []object{configMapVolume("config", "settings")},
			mounts:  map[string]string{"config": "/etc/config"},
		}
		apply(t, ns, optIn(t, cmPod.manifest(t)))
		apply(t, ns, optIn(t, multiPod.manifest(t)))
		apply(t, ns, bystander.manifest(t))
		for _, p := range []*testPod{&cmPod, &multiPod, &bystander} {
			p.ip = waitReady(t, ns, p.name).Status.PodIP
		}
		waitLoaded(t, nudgeWait, cmPod.app(), "/etc/config/edit", "0")
		waitLoaded(t, nudgeWait, multiPod.app(), "/etc/proj/token", "0")
		if v := nudgedValue(ns, cmPod.name); v != "" {
			t.Errorf("a pod was patched at its start (%s), before any edit", v)
		}

		t.Run("ConfigMap edits", func(t *testing.T) {
			leader := leaderOf(t, replicas)
			sum0, n0 := lagOf(t, leader)
			// When the pod's annotation changes, by a watch of the pod: the
			// patch to there is the API server's and the controller's part,
			// the rest the kubelet's and the sidecar's.
			annotated := watchAnnotation(t, ns, cmPod.name)
			var took, toAnnotation []time.Duration
			for i := range 12 {
				if i > 0 {
					editGap()
				}
				start := time.Now()
				took = append(took, timeEdit(t, ns, cmPod, nudgeWait, false))
				select {
				case at := <-annotated:
					toAnnotation = append(toAnnotation, at.Sub(start))
				case <-time.After(nudgeWait):
					t.Fatal("no annotation seen for an edit")
				}
			}
			printTimes(t, "controller: ConfigMap patch to app reloaded WITH the controller (edits 3s apart)", took)
			printTimes(t, "controller: of which ConfigMap patch to pod annotated (kubectl, API server, controller)", toAnnotation)
			if sum, n := lagOf(t, leader); n > n0 {
				figure(t, "controller: of which the controller's part (new version seen to pod patched): mean %.1fms over %.0f nudges",
					(sum-sum0)/(n-n0)*1000, n-n0)
			}
			slices.Sort(took)
			med, worst := took[len(took)/2], took[len(took)-1]
			if med > time.Second || worst > 2*time.Second {
				t.Logf("goal missed: median %s (goal < 1s), max %s (goal < 2s)", med, worst)
			}
			if med > 500*time.Millisecond {
				// More than the kubelet's ~0.1 s and the sidecar's debounce
				// explain: show when the sidecar saw each swap.
				lines := strings.Split(strings.TrimSpace(containerLogs(ns, cmPod.name, "hotreload", false)), "\n")
				t.Logf("the sidecar's last lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
			rv := resourceVersion(t, ns, "configmap", "settings")
			if got, want := nudgedValue(ns, cmPod.name), "configmap/settings@"+rv; got != want {
				t.Errorf("pod annotation %s=%q, want %q", controller.AnnotationNudged, got, want)
			}
		})

		t.Run("Secret and projected volumes", func(t *testing.T) {
			for _, c := range []struct {
				what, file string
				edit       func(v string)
			}{
				{"secret volume", "/etc/creds/password", func(v string) { patchSecret(t, ns, "creds", map[string]string{"password": v}) }},
				{"projected ConfigMap source", "/etc/proj/mode", func(v string) { patchConfigMap(t, ns, "proj-cm", map[string]string{"mode": v}) }},
				{"projected Secret source", "/etc/proj/token", func(v string) { patchSecret(t, ns, "proj-secret", map[string]string{"token": v}) }},
			} {
				var took []time.Duration
				for i := range 3 {
					editGap()
					v := fmt.Sprintf("%s-%d", strings.ReplaceAll(c.what, " ", "-"), i)
					took = append(took, timeLoad(t, multiPod, func() { c.edit(v) }, c.file, v, nudgeWait))
				}
				printTimes(t, "controller: "+c.what+" patch to app reloaded WITH the controller (edits 3s apart)", took)
			}
		})

		t.Run("label-only edit reloads nothing", func(t *testing.T) {
			before, err := appConfig(cmPod.app())
			if err != nil {
				t.Fatal(err)
			}
			mustKubectl(t, nil, "-n", ns, "label", "--overwrite", "configmap", "settings", fmt.Sprintf("e2e-label=%d", time.Now().UnixNano()))
			want := "configmap/settings@" + resourceVersion(t, ns, "configmap", "settings")
			waitFor(t, nudgeWait, func() bool { return nudgedValue(ns, cmPod.name) == want }, func() string {
				return fmt.Sprintf("the label edit was not nudged: %s", nudgedValue(ns, cmPod.name))
			})
			// The kubelet syncs the pod at once and writes nothing; a data
			// edit after it is the app's next reload.
			timeEdit(t, ns, cmPod, nudgeWait, false)
			after, err := appConfig(cmPod.app())
			if err != nil {
				t.Fatal(err)
			}
			if after.Generation != before.Generation+1 {
				t.Errorf("app went from generation %d to %d across a label edit and a data edit, want +1: the label edit reloaded it", before.Generation, after.Generation)
			}
		})

		t.Run("a burst of edits", func(t *testing.T) {
			burstOfEdits(t, ns, cmPod, leaderOf(t, replicas))
		})

		t.Run("a pod that did not opt in is never patched", func(t *testing.T) {
			if v := nudgedValue(ns, bystander.name); v != "" {
				t.Errorf("%s was patched: %s=%s", bystander.name, controller.AnnotationNudged, v)
			}
		})

		t.Run("the shipped workload", func(t *testing.T) {
			// examples/controller/workload.yaml as shipped, in a namespace
			// of its own: an edit of its ConfigMap reaches its app with no
			// nudge from the test.
			wns := namespace(t)
			mustKubectl(t, nil, "-n", wns, "apply", "-f", "../../examples/controller/workload.yaml")
			p := onePod(t, wns, "my-app")
			app := p.url(8080, "")
			waitLoaded(t, nudgeWait, app, "/etc/my-app/app.yaml", "greeting: hello")
			start := time.Now()
			editConfigMap(t, wns, "my-app-config", "app.yaml", func(s string) string {
				return strings.Replace(s, "greeting: hello", "greeting: e2e-added", 1)
			})
			l := waitLoaded(t, nudgeWait, app, "/etc/my-app/app.yaml", "greeting: e2e-added")
			figure(t, "controller: examples/controller/workload.yaml as shipped: ConfigMap patch to app reloaded %.2fs", l.LoadedAt.Sub(start).Seconds())
			rv := resourceVersion(t, wns, "configmap", "my-app-config")
			if got, want := nudgedValue(wns, p.Metadata.Name), "configmap/my-app-config@"+rv; got != want {
				t.Errorf("pod annotation %s=%q, want %q", controller.AnnotationNudged, got, want)
			}
		})

		t.Run("leader failover", func(t *testing.T) {
			old := leaderOf(t, replicas).name
			if h := leaseHolder(t); h != old {
				t.Fatalf("Lease holder %q, but %s says it leads", h, old)
			}
			start := time.Now()
			mustKubectl(t, nil, "-n", controllerNS, "delete", "pod", old, "--wait=false")
			// Edit as soon as the leader has let the Lease go: no replica
			// leads at that moment, so only the new leader's catch-up can
			// nudge it.
			waitFor(t, nudgeWait, func() bool { return leaseHolder(t) != old }, func() string { return "the leader kept the Lease" })
			released := time.Since(start)
			editStart := time.Now()
			took := timeEdit(t, ns, cmPod, nudgeWait, false)
			// The new leader is the standby, or the pod the Deployment
			// made in the old leader's place, whichever took the Lease.
			var holder string
			waitFor(t, nudgeWait, func() bool {
				holder = leaseHolder(t)
				return holder != "" && holder != old
			}, func() string { return fmt.Sprintf("Lease held by %q after %s let it go", holder, old) })
			out, _ := kubectl(nil, "-n", controllerNS, "get", "lease", controllerName, "-o", "jsonpath={.spec.acquireTime}")
			acquired, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(out))
			if err != nil {
				t.Fatalf("Lease acquireTime %q: %v", out, err)
			}
			// The API server keeps microseconds: a margin of one.
			during := acquired.After(editStart.Add(-time.Microsecond))
			figure(t, "controller: leader failover: old leader let the Lease go %.2fs after its pod was deleted; ConfigMap patch made then to app reloaded %.2fs (new leader took over %.2fs after the patch; patch made while no replica led: %v)",
				released.Seconds(), took.Seconds(), acquired.Sub(editStart).Seconds(), during)
			leader := ctlReplica{holder, waitReady(t, controllerNS, holder).Status.PodIP}
			waitMetric(t, nudgeWait, leader.metrics(), "hotreload_controller_leader", nil, 1)
			rv := resourceVersion(t, ns, "configmap", "settings")
			if got, want := nudgedValue(ns, cmPod.name), "configmap/settings@"+rv; got != want {
				t.Errorf("after failover: %s=%q, want %q", controller.AnnotationNudged, got, want)
			}
			replicas = []ctlReplica{leader}
		})

		t.Run("scale", func(t *testing.T) {
			scale(t, replicas[0])
		})
	})
}

// burstOfEdits makes issue #26's burst, 50 edits of one ConfigMap 200 ms
// apart, with the controller's default --coalesce, and counts the pod's
// nudges and the app's reloads; without coalescing the issue saw 50 nudges
// and 11 to 12 reloads per pod. The last edit must still reach the app.
func burstOfEdits(t *testing.T, ns string, p testPod, leader ctlReplica) {
	cs := k8sClient(t)
	ctx := context.Background()
	editGap()
	before, err := appConfig(p.app())
	if err != nil {
		t.Fatal(err)
	}
	patched := func() float64 {
		v, _, _ := metric(leader.metrics(), "hotreload_controller_nudges_total", map[string]string{"result": controller.ResultPatched})
		return v
	}
	patched0 := patched()
	annotated := watchAnnotation(t, ns, p.name)
	const edits, gap = 50, 200 * time.Millisecond
	tick := time.NewTicker(gap)
	defer tick.Stop()
	var last time.Time
	want := ""
	for i := range edits {
		if i > 0 {
			<-tick.C
		}
		want = fmt.Sprintf("burst-%d", i)
		last = time.Now()
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "settings", types.MergePatchType,
			[]byte(`{"data":{"edit":"`+want+`"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l := waitLoaded(t, nudgeWait, p.app(), "/etc/config/edit", want)
	// Let anything still on its way arrive before counting.
	time.Sleep(2 * time.Second)
	nudges := 0
	for len(annotated) > 0 {
		<-annotated
		nudges++
	}
	after, err := appConfig(p.app())
	if err != nil {
		t.Fatal(err)
	}
	figure(t, "controller: burst of %d edits %s apart (--coalesce 300ms): %d nudges of the pod (%.0f patches counted by the leader), %d app reloads; last edit served %.2fs after it was made (issue #26, uncoalesced: 50 nudges, 11-12 reloads)",
		edits, gap, nudges, patched()-patched0, after.Generation-before.Generation, l.LoadedAt.Sub(last).Seconds())
	// 10 s of edits: the first at once, then at most one per 3 s, and one
	// after the last; a margin for the edits' own jitter.
	if nudges > 8 {
		t.Errorf("%d nudges for one burst, want at most 8: the burst was not coalesced", nudges)
	}
	if d := l.LoadedAt.Sub(last); d > time.Second {
		t.Logf("goal missed: the last edit served %s after it was made (goal < 1s)", d)
	}
}

// scale stores scalePods pods bound to a node no kubelet runs (ghostNode:
// the API server stores them and the controller watches them), all mounting
// one ConfigMap, and scaleConfigMaps more ConfigMaps; edits the shared
// ConfigMap and measures how long the leader takes to patch every pod at its
// default rate limit, and its memory.
func scale(t *testing.T, leader ctlReplica) {
	cs := k8sClient(t)
	ctx := context.Background()
	ns := namespace(t)
	ghost := ghostNode(t, cs)
	t.Cleanup(func() {
		// No kubelet will confirm these pods' deletion: delete them at once.
		zero := int64(0)
		if err := cs.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			t.Errorf("delete the scale pods: %v", err)
		}
		if err := cs.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("delete the scale ConfigMaps: %v", err)
		}
	})
	rss := func() float64 {
		v, ok, err := metric(leader.metrics(), "process_resident_memory_bytes", nil)
		if err != nil || !ok {
			t.Fatalf("controller RSS: %v (present %v)", err, ok)
		}
		return v
	}
	rss0 := rss()
	pods0, _, _ := metric(leader.metrics(), "hotreload_controller_pods", nil)

	// parallel runs f for 0..n-1 on 16 goroutines and fails on the first error.
	parallel := func(what string, n int, f func(i int) error) {
		t.Helper()
		start := time.Now()
		var (
			mu    sync.Mutex
			first error
			wg    sync.WaitGroup
			next  = make(chan int)
		)
		for range 16 {
			wg.Go(func() {
				for i := range next {
					if err := f(i); err != nil {
						mu.Lock()
						if first == nil {
							first = fmt.Errorf("%s %d: %w", what, i, err)
						}
						mu.Unlock()
					}
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		if first != nil {
			t.Fatal(first)
		}
		t.Logf("%s: %d in %s", what, n, time.Since(start).Round(time.Millisecond))
	}

	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	parallel("create ConfigMaps", scaleConfigMaps, func(i int) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)},
			Data:       map[string]string{"app.yaml": strings.Repeat("x", 256)},
		}, metav1.CreateOptions{})
		return err
	})
	no := false
	parallel("create pods on node "+ghost, scalePods, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ghost-%04d", i), Annotations: map[string]string{controller.AnnotationNudge: "true"}},
			Spec: corev1.PodSpec{
				NodeName:                     ghost,
				Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{Name: "app", Image: "localhost/hotreload-e2e/pause:e2e",
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config"}}}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}},
			},
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		// What the kubelet would report: the pod runs.
		created.Status.Phase = corev1.PodRunning
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	waitFor(t, nudgeWait, func() bool {
		v, ok, err := metric(leader.metrics(), "hotreload_controller_pods", nil)
		return err == nil && ok && v >= pods0+scalePods
	}, func() string { return "the controller does not see the pods" })
	rss1 := rss()

	countNudged := func(want string) int {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range list.Items {
			if v := p.Annotations[controller.AnnotationNudged]; v != "" && (want == "" || v == want) {
				n++
			}
		}
		return n
	}
	if n := countNudged(""); n != 0 {
		t.Errorf("%d pods were patched as they started, want none", n)
	}

	patched0, _, _ := metric(leader.metrics(), "hotreload_controller_nudges_total", map[string]string{"result": controller.ResultPatched})
	start := time.Now()
	cm, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "shared", types.MergePatchType, []byte(`{"data":{"v":"1"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "configmap/shared@" + cm.ResourceVersion
	var took time.Duration
	waitFor(t, 10*time.Minute, func() bool {
		v, _, err := metric(leader.metrics(), "hotreload_controller_nudges_total", map[string]string{"result": controller.ResultPatched})
		if err != nil || v-patched0 < scalePods {
			return false
		}
		took = time.Since(start)
		return true
	}, func() string { return "the controller did not patch every pod" })
	if n := countNudged(want); n != scalePods {
		t.Errorf("%d pods have %s=%s, want %d", n, controller.AnnotationNudged, want, scalePods)
	}
	rss2 := rss()
	figure(t, "controller: scale: %d running pods mounting one ConfigMap, all patched %.1fs after its edit (%.0f pods/s, default --qps 50 --burst 100)",
		scalePods, took.Seconds(), scalePods/took.Seconds())
	figure(t, "controller: scale: RSS %.1f MiB before, %.1f MiB with %d pods and %d ConfigMaps watched, %.1f MiB after patching them all",
		rss0/(1<<20), rss1/(1<<20), scalePods, scaleConfigMaps+1, rss2/(1<<20))
}

// ghostNode registers a Node that no kubelet runs, for pods that the API
// server stores and the controller watches but nothing starts. It is tainted
// so that the scheduler places nothing there, and kept Ready as a kubelet
// would keep it: its Lease is renewed every 5 s until the test ends, so that
// the node controller neither marks its pods not ready nor evicts them (and
// the pod garbage collector deletes no pod of a node that exists).
func ghostNode(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	const name = "ghost"
	ctx := context.Background()
	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "e2e.hotreload.dev/ghost", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete node %s: %v", name, err)
		}
	})
	// The controller-manager changes a new Node (its pod range, taints):
	// set the status on the newest.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "E2EGhost", LastHeartbeatTime: now, LastTransitionTime: now}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	holder, duration := name, int32(40)
	renewed := metav1.NewMicroTime(time.Now())
	lease, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, RenewTime: &renewed},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renewCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-tick.C:
			}
			renewed := metav1.NewMicroTime(time.Now())
			lease.Spec.RenewTime = &renewed
			if l, err := leases.Update(renewCtx, lease, metav1.UpdateOptions{}); err == nil {
				lease = l
			} else if l, err := leases.Get(renewCtx, name, metav1.GetOptions{}); err == nil {
				lease = l // a conflict: renew the newest next time
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = leases.Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}
