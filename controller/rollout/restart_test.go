package rollout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotreload/hotreload/test/support/poll"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubelet models what happens in a pod in restart mode when its revision
// changes: the sidecar restarts the app (a restart counted, the pod not
// Ready), reports the revision pending, then applied, and the app is
// Ready again 2 s after the change.
type kubelet struct {
	e        *env
	ref      string
	mu       sync.Mutex
	since    map[string]time.Time // pod -> when its revision changed
	want     map[string]string
	maxDown  int // the most pods not Ready at once
	restarts map[string]int
}

func (e *env) kubelet(ctx context.Context, wg *sync.WaitGroup, ref string) *kubelet {
	k := &kubelet{e: e, ref: ref, since: map[string]time.Time{}, want: map[string]string{}, restarts: map[string]int{}}
	e.mu.Lock()
	e.restartModel = k
	e.mu.Unlock()
	wg.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			k.tick()
		}
	})
	return k
}

func (k *kubelet) tick() {
	list, err := k.e.core.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	down := 0
	for _, p := range list.Items {
		w := Revisions(&p)[k.ref]
		k.mu.Lock()
		prev, seen := k.want[p.Name]
		k.want[p.Name] = w
		changed := seen && w != prev && w != "" && prev != ""
		if changed {
			k.since[p.Name] = time.Now()
		}
		since, restarting := k.since[p.Name]
		k.mu.Unlock()
		if changed {
			k.e.setPod(p.Name, func(p *corev1.Pod) {
				p.Status.Conditions[0].Status = corev1.ConditionFalse
				p.Status.ContainerStatuses[0].RestartCount++
			})
			k.mu.Lock()
			k.restarts[p.Name]++
			k.mu.Unlock()
		} else if restarting && time.Since(since) >= 2*time.Second && p.Status.Conditions[0].Status == corev1.ConditionFalse {
			k.e.setPod(p.Name, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue })
		}
		if changed || restarting && time.Since(since) < 2*time.Second {
			down++
		}
	}
	k.mu.Lock()
	k.maxDown = max(k.maxDown, down)
	k.mu.Unlock()
}

// report: pending for the first second after a change, applied after.
func (k *kubelet) report(p *corev1.Pod, r *Report) {
	k.mu.Lock()
	defer k.mu.Unlock()
	// The sidecar knows the annotation the kubelet last wrote for it.
	r.Want, r.Running, r.Result = k.want[p.Name], k.want[p.Name], ResultApplied
	if since, ok := k.since[p.Name]; ok && time.Since(since) < time.Second {
		r.Result = ResultPending
	}
}

// Pods in restart mode and no ConfigRollout: an edit moves them to the
// new revision one at a time, the next once the previous is Ready again;
// each app restarts once, and the pods end on the new revision.
func TestRestartModeOneAtATime(t *testing.T) {
	for _, batch := range []string{"", "2"} {
		t.Run("batch="+batch, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.configMap("app", map[string]string{"app.yaml": "v: 1"})
				for _, n := range names("app-", 4) {
					e.pod(n, "app", restartPod, ownedBy("rs-1"), func(p *corev1.Pod) {
						if batch != "" {
							p.Annotations[AnnotationRestartBatch] = batch
						}
					})
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				defer func() { cancel(); wg.Wait() }()
				k := e.kubelet(ctx, &wg, "configmap/app")
				c := e.start(Options{})
				// The stable copy appears and every pod is given its revision,
				// which restarts nothing (it is what they run).
				var stable string
				waitUntil(t, "the pods name the stable revision", func() bool {
					revs := e.revisions("configmap/app")
					stable = revs["app-00"]
					for _, r := range revs {
						if r == "" || r != stable {
							return false
						}
					}
					return true
				})
				time.Sleep(5 * time.Second)
				rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
				waitUntil(t, "every pod runs the new revision", func() bool {
					for _, r := range e.revisions("configmap/app") {
						if r != rev {
							return false
						}
					}
					res, _ := e.stable("app")
					return res.Stable.Revision == rev
				})
				time.Sleep(5 * time.Second)
				k.mu.Lock()
				defer k.mu.Unlock()
				want := 1
				if batch == "2" {
					want = 2
				}
				if k.maxDown != want {
					t.Errorf("at most %d pods restarted at once, want %d\n%s", k.maxDown, want, e.logs.String())
				}
				for _, n := range names("app-", 4) {
					if k.restarts[n] != 1 {
						t.Errorf("%s restarted %d times, want once", n, k.restarts[n])
					}
				}
				if !e.hasEvent("Pod", ReasonRestartAssigned, "hotreload restarts the app's container") {
					t.Errorf("no RestartAssigned Event on the pods: %v", e.events())
				}
				if !strings.Contains(e.logs.String(), "restart:configmap/app") {
					t.Errorf("no log line names the restart rollout")
				}
				_ = c
			})
		})
	}
}

// Refused in one line each, and left where they are: restartPolicy Never,
// no shared process namespace, a single pod without consent, a volume
// with items, a source mounted without its stable copy.
func TestRefusedPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		e.pod("never", "app", restartPod, ownedBy("rs-1"), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever })
		e.pod("ok-0", "app", restartPod, ownedBy("rs-1"))
		e.pod("ok-1", "app", restartPod, ownedBy("rs-1"))
		e.pod("noshare", "app", restartPod, ownedBy("rs-1"), func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = nil })
		e.pod("single", "app", restartPod, ownedBy("rs-2"))
		e.pod("single-ok", "app", restartPod, ownedBy("rs-3"), func(p *corev1.Pod) { p.Annotations[AnnotationSingleReplica] = "true" })
		e.pod("items", "app", restartPod, ownedBy("rs-1"), func(p *corev1.Pod) {
			p.Spec.Volumes[0].ConfigMap.Items = []corev1.KeyToPath{{Key: "app.yaml", Path: "app.yaml"}}
		})
		e.pod("nostable", "app", func(p *corev1.Pod) { p.Spec.Volumes = p.Spec.Volumes[:1] })
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		e.kubelet(ctx, &wg, "configmap/app")
		e.start(Options{})
		rev := ""
		time.Sleep(5 * time.Second)
		rev = e.edit("app", map[string]string{"app.yaml": "v: 2"})
		waitUntil(t, "the accepted pods run the new revision", func() bool {
			revs := e.revisions("configmap/app")
			return revs["ok-0"] == rev && revs["ok-1"] == rev && revs["single-ok"] == rev
		})
		time.Sleep(10 * time.Second)
		revs := e.revisions("configmap/app")
		for pod, why := range map[string]string{
			"never":    "restartPolicy Never",
			"noshare":  "shareProcessNamespace: true",
			"single":   "hotreload.dev/restart-single-replica",
			"items":    "(items)",
			"nostable": "not its stable copy app-hotreload-stable",
		} {
			if revs[pod] == rev {
				t.Errorf("%s was moved to %s", pod, rev)
			}
			if !e.hasEvent("Pod", ReasonPodRejected, why) {
				t.Errorf("no PodRejected Event on %s saying %q: %v", pod, why, e.events())
			}
			if n := strings.Count(e.logs.String(), fmt.Sprintf("pod %s is left", pod)); n != 1 {
				t.Errorf("%d log lines about %s, want 1", n, pod)
			}
		}
	})
}

// waitUntil waits, in virtual time, until cond holds, for at most 10
// minutes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.EventuallyEvery(t, 100*time.Millisecond, 10*time.Minute, cond, func() string { return "waiting until " + what })
}
