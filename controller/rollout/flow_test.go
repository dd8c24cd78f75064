package rollout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"time"

	k8stesting "k8s.io/client-go/testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (e *env) annotate(name, key, value string) {
	e.t.Helper()
	r := e.get(name)
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	r.Annotations[key] = value
	u, _ := toUnstructured(r)
	if _, err := e.dyn.Resource(GVR).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) setPaused(name string, paused bool) {
	e.t.Helper()
	r := e.get(name)
	r.Spec.Paused = paused
	u, _ := toUnstructured(r)
	if _, err := e.dyn.Resource(GVR).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func tenPods(e *env) {
	for _, n := range names("app-", 10) {
		e.pod(n, "app")
	}
}

func (e *env) onRevision(ref, rev string) []string {
	var out []string
	for p, r := range e.revisions(ref) {
		if r == rev {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Pause holds the step, resume goes on, promote-now makes the candidate
// stable at once, and each action is handled once and removed.
func TestPauseResumePromote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		tenPods(e)
		e.rollout("app", "app", []string{"10%", "50%", "100%"}, "10s")
		e.start(Options{})
		e.waitPhase("app", PhaseHealthy, time.Minute)
		e.setPaused("app", true)
		rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
		e.waitPhase("app", PhasePaused, time.Minute)
		time.Sleep(time.Minute)
		if got := e.onRevision("configmap/app", rev); len(got) != 0 {
			t.Errorf("paused before it started, yet %v were moved", got)
		}
		e.setPaused("app", false)
		waitUntil(t, "step 1 runs", func() bool { return len(e.onRevision("configmap/app", rev)) == 1 })
		time.Sleep(2 * time.Second)
		e.setPaused("app", true)
		r := e.waitPhase("app", PhasePaused, time.Minute)
		time.Sleep(time.Minute)
		if got := e.onRevision("configmap/app", rev); len(got) != 1 || r.Status.Step != 1 {
			t.Errorf("paused at step %d with %v on the candidate, want step 1 and one pod", r.Status.Step, got)
		}
		if !e.hasEvent("ConfigRollout", ReasonPaused, "") {
			t.Errorf("no RolloutPaused Event")
		}
		e.annotate("app", AnnotationAction, ActionPromote)
		e.waitPhase("app", PhaseHealthy, time.Minute)
		synctest.Wait()
		r = e.get("app")
		if r.Status.StableRevision != rev || r.Status.LastAction != "promote "+rev || r.Annotations[AnnotationAction] != "" {
			t.Errorf("after promote: stable %s, lastAction %q, annotation %q", r.Status.StableRevision, r.Status.LastAction, r.Annotations[AnnotationAction])
		}
		if got := e.onRevision("configmap/app", rev); len(got) != 10 {
			t.Errorf("%d pods on the promoted revision, want 10", len(got))
		}
	})
}

// An edit reverted during a rollout: the pods on the candidate go back to
// stable and the rollout ends Healthy. An edit made during a rollout
// starts a rollout of its own, from step 1.
func TestRevertAndNewEditDuringARollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		tenPods(e)
		e.rollout("app", "app", []string{"10%", "50%", "100%"}, "10s")
		e.start(Options{})
		stable := e.waitPhase("app", PhaseHealthy, time.Minute).Status.StableRevision
		rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
		waitUntil(t, "step 2 runs", func() bool { return len(e.onRevision("configmap/app", rev)) == 5 })
		e.edit("app", map[string]string{"app.yaml": "v: 1"})
		waitUntil(t, "every pod is back on stable", func() bool { return len(e.onRevision("configmap/app", stable)) == 10 })
		if r := e.waitPhase("app", PhaseHealthy, time.Minute); r.Status.StableRevision != stable {
			t.Errorf("stable %s after the revert, want %s", r.Status.StableRevision, stable)
		}

		rev2 := e.edit("app", map[string]string{"app.yaml": "v: 2"})
		waitUntil(t, "step 2 of the second edit runs", func() bool { return len(e.onRevision("configmap/app", rev2)) == 5 })
		rev3 := e.edit("app", map[string]string{"app.yaml": "v: 3"})
		waitUntil(t, "the third edit starts at step 1", func() bool {
			r := e.get("app")
			return r.Status.Revision == rev3 && r.Status.Step == 1 && len(e.onRevision("configmap/app", rev3)) == 1
		})
		if got := e.onRevision("configmap/app", rev2); len(got) != 0 {
			t.Errorf("%v still on the superseded candidate %s", got, rev2)
		}
		r := e.waitPhase("app", PhaseHealthy, 2*time.Minute)
		if r.Status.StableRevision != rev3 {
			t.Errorf("stable %s, want %s", r.Status.StableRevision, rev3)
		}
	})
}

// During a rollout, a pod deleted and the workload scaled up: new pods
// start on stable, are counted, and the later steps choose them; every
// pod ends on the new revision.
func TestPodsComeAndGoDuringARollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		tenPods(e)
		e.rollout("app", "app", []string{"10%", "50%", "100%"}, "10s")
		e.start(Options{})
		e.waitPhase("app", PhaseHealthy, time.Minute)
		rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
		waitUntil(t, "step 1 runs", func() bool { return len(e.onRevision("configmap/app", rev)) == 1 })
		if err := e.core.CoreV1().Pods(ns).Delete(context.Background(), "app-00", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, n := range names("new-", 4) {
			e.pod(n, "app")
		}
		r := e.waitPhase("app", PhaseHealthy, 2*time.Minute)
		if r.Status.StableRevision != rev || r.Status.Total != 13 {
			t.Errorf("stable %s, total %d; want %s and 13 pods", r.Status.StableRevision, r.Status.Total, rev)
		}
		if got := e.onRevision("configmap/app", rev); len(got) != 13 {
			t.Errorf("%d pods on %s, want 13: %v", len(got), rev, e.revisions("configmap/app"))
		}
	})
}

// Deleting the ConfigRollout deletes the stable copy (no pod in restart
// mode uses the source): the pods run the source again, as without a
// policy.
func TestRolloutDeletedDeletesTheStableCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		e.pod("app-00", "app")
		e.rollout("app", "app", []string{"100%"}, "")
		e.start(Options{})
		e.waitPhase("app", PhaseHealthy, time.Minute)
		if err := e.dyn.Resource(GVR).Namespace(ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the stable copy is deleted", func() bool {
			_, err := e.core.CoreV1().ConfigMaps(ns).Get(context.Background(), "app"+StableSuffix, metav1.GetOptions{})
			return err != nil
		})
	})
}

// Config in env vars, in restart mode: the pods are given the new
// revision one at a time (each restarts its app, which reads the source
// again); an abort stops there and moves no pod back, since a restart
// would read the source as it is.
func TestEnvSourceRestartsOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("env", map[string]string{"LEVEL": "info"})
		envPod := func(p *corev1.Pod) {
			p.Spec.Volumes = nil
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}}
		}
		for _, n := range names("app-", 4) {
			e.pod(n, "env", restartPod, ownedBy("rs-1"), envPod)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		k := e.kubelet(ctx, &wg, "configmap/env")
		e.start(Options{})
		time.Sleep(5 * time.Second)
		if revs := e.revisions("configmap/env"); revs["app-00"] != "" {
			t.Fatalf("a pod with config in env vars was given a revision before any edit (that restarts it): %v", revs)
		}
		rev := e.edit("env", map[string]string{"LEVEL": "debug"})
		waitUntil(t, "every pod is on the new revision", func() bool { return len(e.onRevision("configmap/env", rev)) == 4 })
		k.mu.Lock()
		if k.maxDown > 1 {
			t.Errorf("%d pods restarted at once, want 1", k.maxDown)
		}
		k.mu.Unlock()

		// A bad one: the second pod's app never gets Ready: the deadline
		// aborts, the pods that restarted stay where they are.
		start := time.Now()
		bad := e.edit("env", map[string]string{"LEVEL": "bogus"})
		e.mu.Lock()
		e.behave["app-01"] = func(r *Report) { r.Result = ResultPending }
		e.mu.Unlock()
		waitUntil(t, "the restart rollout aborts at the deadline", func() bool {
			if time.Since(start) > 7*time.Minute {
				t.Fatalf("no abort:\n%s", e.logs.String())
			}
			return strings.Contains(e.logs.String(), "did not complete within the progress deadline")
		})
		synctest.Wait()
		time.Sleep(10 * time.Second)
		on := e.onRevision("configmap/env", bad)
		if !slices.Equal(on, []string{"app-00", "app-01"}) {
			t.Errorf("after the abort %v are on %s, want app-00 and app-01 left there", on, bad)
		}
	})
}

// A query that fails when a rollout would start refuses to start it: the
// phase is Failed, no pod moves, an Event says why; once the query
// answers, the rollout starts by itself.
func TestFailingQueryRefusesToStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		tenPods(e)
		mx := 1.0
		e.rollout("app", "app", []string{"10%", "100%"}, "", func(s *Spec) {
			s.Analysis = &Analysis{Prometheus: &PrometheusAnalysis{Address: "http://prometheus:9090", Query: "q", Max: &mx}}
		})
		e.mu.Lock()
		e.queryErr = errors.New("dial tcp 10.0.0.9:9090: connect: connection refused")
		e.mu.Unlock()
		e.start(Options{})
		e.waitPhase("app", PhaseHealthy, time.Minute)
		rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
		r := e.waitPhase("app", PhaseFailed, time.Minute)
		if !strings.Contains(r.Status.Message, "does not start: the analysis query fails: dial tcp") {
			t.Errorf("message %q", r.Status.Message)
		}
		time.Sleep(time.Minute)
		if got := e.everRevision("configmap/app", rev); len(got) != 0 {
			t.Errorf("%v were moved though the rollout did not start", got)
		}
		if !e.hasEvent("ConfigRollout", ReasonInvalid, "the analysis query fails") {
			t.Errorf("no PolicyInvalid Event: %v", e.events())
		}
		e.mu.Lock()
		e.queryErr = nil
		e.mu.Unlock()
		r = e.waitPhase("app", PhaseHealthy, 2*time.Minute)
		if r.Status.StableRevision != rev {
			t.Errorf("stable %s once the query answers, want %s", r.Status.StableRevision, rev)
		}
	})
}

// A second replica that starts leading mid-rollout (while the first still
// does, as after a frozen leader resumes) takes the rollout up where it is:
// it reads the ConfigRollout's status (or, for staggered restarts, the
// stable copy and the pods' annotations), never moves a pod back, never
// starts over at step 1; in restart mode no app restarts twice and no two
// at once.
func TestFailoverResumes(t *testing.T) {
	t.Run("ConfigRollout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.configMap("app", map[string]string{"app.yaml": "v: 1"})
			tenPods(e)
			e.rollout("app", "app", []string{"10%", "50%", "100%"}, "10s")
			e.start(Options{})
			e.waitPhase("app", PhaseHealthy, time.Minute)
			rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
			waitUntil(t, "step 2 runs", func() bool { return len(e.onRevision("configmap/app", rev)) == 5 })
			before := len(e.core.Actions())
			// The first replica keeps running as the second starts: both
			// lead for a while, as after a frozen leader resumes.
			ctx2, cancel2 := context.WithCancel(context.Background())
			var wg2 sync.WaitGroup
			defer func() { cancel2(); wg2.Wait() }()
			e.controller(ctx2, &wg2, Options{})
			r := e.waitPhase("app", PhaseHealthy, 2*time.Minute)
			if r.Status.StableRevision != rev {
				t.Fatalf("stable %s, want %s", r.Status.StableRevision, rev)
			}
			for _, a := range e.core.Actions()[before:] {
				if pa, ok := a.(k8stesting.PatchAction); ok && strings.Contains(string(pa.GetPatch()), "configmap/app") && !strings.Contains(string(pa.GetPatch()), rev) {
					t.Errorf("a pod was moved off the candidate after the second replica started: %s %s", pa.GetName(), pa.GetPatch())
				}
			}
		})
	})
	t.Run("restart mode", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.configMap("app", map[string]string{"app.yaml": "v: 1"})
			for _, n := range names("app-", 6) {
				e.pod(n, "app", restartPod, ownedBy("rs-1"))
			}
			kctx, kcancel := context.WithCancel(context.Background())
			var kwg sync.WaitGroup
			defer func() { kcancel(); kwg.Wait() }()
			k := e.kubelet(kctx, &kwg, "configmap/app")
			e.start(Options{})
			time.Sleep(5 * time.Second)
			rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
			waitUntil(t, "two pods restarted", func() bool { return len(e.onRevision("configmap/app", rev)) >= 2 })
			ctx2, cancel2 := context.WithCancel(context.Background())
			var wg2 sync.WaitGroup
			defer func() { cancel2(); wg2.Wait() }()
			e.controller(ctx2, &wg2, Options{})
			waitUntil(t, "every pod restarted", func() bool { return len(e.onRevision("configmap/app", rev)) == 6 })
			time.Sleep(10 * time.Second)
			k.mu.Lock()
			defer k.mu.Unlock()
			for _, n := range names("app-", 6) {
				if k.restarts[n] != 1 {
					t.Errorf("%s restarted %d times, want once", n, k.restarts[n])
				}
			}
			if k.maxDown > 1 {
				t.Errorf("%d pods restarted at once with two replicas leading, want 1", k.maxDown)
			}
		})
	})
}
