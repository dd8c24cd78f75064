package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/hotreload/hotreload/internal/revision"
	"github.com/hotreload/hotreload/test/support/poll"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}

// A good edit in three steps (10 %, 50 %, 100 %) with a bake of 10 s, in
// virtual time: each step starts only after the one before has baked,
// every pod ends on the new revision, and the stable copy holds it.
func TestGoodEditInThreeSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		for _, n := range names("app-", 10) {
			e.pod(n, "app")
		}
		e.rollout("app", "app", []string{"10%", "50%", "100%"}, "10s")
		c := e.start(Options{})
		r := e.waitPhase("app", PhaseHealthy, time.Minute)
		stable := r.Status.StableRevision
		for p, rev := range e.revisions("configmap/app") {
			if rev != stable {
				t.Errorf("before the edit, %s names revision %q, want the stable %s", p, rev, stable)
			}
		}
		res, data := e.stable("app")
		if res.Stable.Revision != stable || res.Candidate != nil || data["app.yaml"] != "v: 1" {
			t.Fatalf("stable copy %+v %v", res, data)
		}

		start := time.Now()
		rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
		// The step counts, as status reports them, and when each began.
		var timeline []string
		last := ""
		// The timeline below tells a rollout that never ends.
		poll.Each(100*time.Millisecond, 2*time.Minute, func() bool {
			r = e.get("app")
			s := fmt.Sprintf("%s step %d/%d updated %d", r.Status.Phase, r.Status.Step, r.Status.Steps, r.Status.Updated)
			if s != last && (len(timeline) > 0 || r.Status.Phase != PhaseHealthy) {
				timeline = append(timeline, fmt.Sprintf("%4.0fs %s", time.Since(start).Seconds(), s))
				last = s
			}
			return r.Status.Phase == PhaseHealthy && r.Status.StableRevision == rev
		})
		want := []string{
			"   0s Progressing step 1/3 updated 1",
			"  10s Progressing step 2/3 updated 5",
			"  20s Progressing step 3/3 updated 10",
			"  30s Healthy step 0/3 updated 0",
		}
		if !slices.Equal(timeline, want) {
			t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(timeline, "\n"), strings.Join(want, "\n"))
		}
		for p, got := range e.revisions("configmap/app") {
			if got != rev {
				t.Errorf("%s runs %q, want %s", p, got, rev)
			}
		}
		res, data = e.stable("app")
		if res.Stable.Revision != rev || res.Candidate != nil || data["app.yaml"] != "v: 2" {
			t.Errorf("stable copy after promotion: %+v %v", res, data)
		}
		if want := revision.Hex(revision.ConfigMapSum(map[string]string{"app.yaml": "v: 2"}, nil)); res.Stable.SHA256 != want {
			t.Errorf("stable sum %s, want %s", res.Stable.SHA256, want)
		}
		for _, ev := range []string{"RolloutStarted", "StepStarted", "StepPromoted", "RolloutPromoted"} {
			if !e.hasEvent("ConfigRollout", ev, "") || !e.hasEvent("ConfigMap", ev, "") {
				t.Errorf("no %s Event on the ConfigRollout and the ConfigMap: %v", ev, e.events())
			}
		}
		if n := testutil.ToFloat64(c.m.rollouts.WithLabelValues(ns, "app", "promoted")); n != 1 {
			t.Errorf("rollouts_total{result=promoted} = %v, want 1", n)
		}
		if n := testutil.ToFloat64(c.m.phase.WithLabelValues(ns, "app", PhaseHealthy)); n != 1 {
			t.Errorf("rollout_phase{phase=Healthy} = %v, want 1", n)
		}
	})
}

// A bad edit that the app refuses is aborted at step 1: only the first
// step's pod was ever given it, every pod is back on stable, the stable
// copy keeps the old content without a candidate, and the phase stays
// Aborted until the content changes again; the next good edit rolls out.
func TestRejectedEditAbortsAtTheFirstStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.configMap("app", map[string]string{"app.yaml": "v: 1"})
		for _, n := range names("app-", 10) {
			e.pod(n, "app")
		}
		e.rollout("app", "app", []string{"10%", "50%", "100%"}, "10s")
		c := e.start(Options{})
		stable := e.waitPhase("app", PhaseHealthy, time.Minute).Status.StableRevision

		bad := e.edit("app", map[string]string{"app.yaml": "v: [broken"})
		e.mu.Lock()
		e.rejects[bad] = true
		e.mu.Unlock()
		r := e.waitPhase("app", PhaseAborted, time.Minute)
		if !strings.Contains(r.Status.Message, "rejected revision "+bad) {
			t.Errorf("message %q does not say which pod rejected what", r.Status.Message)
		}
		synctest.Wait()
		if got := e.everRevision("configmap/app", bad); !slices.Equal(got, []string{"app-00"}) {
			t.Errorf("pods ever given the bad revision: %v, want only the first step's app-00", got)
		}
		for p, got := range e.revisions("configmap/app") {
			if got != stable {
				t.Errorf("%s names %q after the abort, want stable %s", p, got, stable)
			}
		}
		res, data := e.stable("app")
		if res.Candidate != nil || res.Stable.Revision != stable || data["app.yaml"] != "v: 1" || res.Aborted == nil || res.Aborted.Revision != bad {
			t.Errorf("stable copy after the abort: %+v %v", res, data)
		}
		if !e.hasEvent("ConfigRollout", "RolloutAborted", "app-00 rejected") {
			t.Errorf("no RolloutAborted Event: %v", e.events())
		}
		if n := testutil.ToFloat64(c.m.rollouts.WithLabelValues(ns, "app", "aborted")); n != 1 {
			t.Errorf("rollouts_total{result=aborted} = %v, want 1", n)
		}
		// It stays aborted: a minute later nothing moved.
		time.Sleep(time.Minute)
		if r := e.get("app"); r.Status.Phase != PhaseAborted {
			t.Errorf("phase %s a minute after the abort, want Aborted", r.Status.Phase)
		}
		if got := e.everRevision("configmap/app", bad); len(got) != 1 {
			t.Errorf("pods ever given the bad revision: %v", got)
		}

		good := e.edit("app", map[string]string{"app.yaml": "v: 3"})
		r = e.waitPhase("app", PhaseHealthy, 2*time.Minute)
		if r.Status.StableRevision != good {
			t.Errorf("stable %s after a good edit, want %s", r.Status.StableRevision, good)
		}
	})
}

// What aborts during a step besides a rejection: a pod on the candidate
// that turns NotReady, or restarts a container, a Ready pod whose sidecar
// cannot deliver the candidate (at once, not at the deadline), the
// progress deadline, the analysis query out of bounds or failing, and the
// abort action.
func TestAbortCauses(t *testing.T) {
	const noProcess = "no process named app (does the pod set shareProcessNamespace: true?)"
	for _, tc := range []struct {
		name    string
		spec    func(*Spec)
		during  func(e *env)
		message string
	}{
		{"not ready", nil, func(e *env) {
			e.setPod("app-00", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse })
		}, "app-00 is not Ready"},
		{"restarted", nil, func(e *env) {
			e.setPod("app-00", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 1 })
		}, "app-00 restarted a container"},
		{"never applied", nil, func(e *env) {
			e.mu.Lock()
			e.behave["app-00"] = func(r *Report) { r.Result, r.Running = ResultWaiting, "" }
			e.mu.Unlock()
		}, "did not complete within the progress deadline 1m0s: app-00 (waiting)"},
		{"cannot deliver", nil, func(e *env) {
			e.mu.Lock()
			e.behave["app-00"] = func(r *Report) { r.Result, r.Error = ResultPending, noProcess }
			e.mu.Unlock()
		}, "pod app-00 cannot apply revision"},
		{"cannot deliver while not Ready", nil, func(e *env) {
			// Pending first, so that the pod is never seen not Ready on a
			// candidate it applied (that aborts at once, the case above),
			// nor Ready with the error (the case before); then not Ready,
			// seen by every informer; then the error.
			e.mu.Lock()
			e.behave["app-00"] = func(r *Report) { r.Result = ResultPending }
			e.mu.Unlock()
			synctest.Wait()
			e.setPod("app-00", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse })
			synctest.Wait()
			e.mu.Lock()
			e.behave["app-00"] = func(r *Report) {
				r.Result, r.Error = ResultPending, "POST http://127.0.0.1:8080/-/reload: connection refused"
			}
			e.mu.Unlock()
		}, "did not complete within the progress deadline 1m0s: app-00 (pending: POST http://127.0.0.1:8080/-/reload: connection refused)"},
		{"query out of bounds", func(s *Spec) {
			mx := 0.5
			s.Analysis = &Analysis{Prometheus: &PrometheusAnalysis{Address: "http://prometheus:9090", Query: "errors", Max: &mx}}
		}, func(e *env) {
			e.mu.Lock()
			e.queryVal = 3
			e.mu.Unlock()
		}, "the analysis query is out of bounds: 3, max 0.5"},
		{"query fails", func(s *Spec) {
			mx := 0.5
			s.Analysis = &Analysis{Prometheus: &PrometheusAnalysis{Address: "http://prometheus:9090", Query: "errors", Max: &mx}}
		}, func(e *env) {
			e.mu.Lock()
			e.queryErr = fmt.Errorf("connection refused")
			e.mu.Unlock()
		}, "the analysis query fails: connection refused"},
		{"action", nil, func(e *env) {
			r := e.get("app")
			r.Annotations = map[string]string{AnnotationAction: "abort"}
			u, _ := toUnstructured(r)
			if _, err := e.dyn.Resource(GVR).Namespace(ns).Update(t.Context(), u, metav1UpdateOptions()); err != nil {
				t.Fatal(err)
			}
		}, "aborted by hotreload.dev/action=abort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.configMap("app", map[string]string{"app.yaml": "v: 1"})
				for _, n := range names("app-", 4) {
					e.pod(n, "app")
				}
				e.rollout("app", "app", []string{"25%", "100%"}, "1m", func(s *Spec) {
					s.ProgressDeadline = "1m"
					if tc.spec != nil {
						tc.spec(s)
					}
				})
				e.start(Options{})
				stable := e.waitPhase("app", PhaseHealthy, time.Minute).Status.StableRevision
				rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
				time.Sleep(5 * time.Second)
				if r := e.get("app"); r.Status.Phase != PhaseProgressing || r.Status.Step != 1 {
					t.Fatalf("5s after the edit: %s step %d (%s)", r.Status.Phase, r.Status.Step, r.Status.Message)
				}
				tc.during(e)
				during := time.Now()
				r := e.waitPhase("app", PhaseAborted, 2*time.Minute)
				if !strings.Contains(r.Status.Message, tc.message) {
					t.Errorf("message %q, want it to say %q", r.Status.Message, tc.message)
				}
				if tc.name == "cannot deliver" {
					if took := time.Since(during); took > 5*time.Second {
						t.Errorf("aborted %s after the pod reported the error, want at once (the deadline is 1m)", took)
					}
					if !strings.Contains(r.Status.Message, rev+": "+noProcess) {
						t.Errorf("message %q, want the revision and the sidecar's error", r.Status.Message)
					}
				}
				synctest.Wait()
				for p, got := range e.revisions("configmap/app") {
					if got != stable {
						t.Errorf("%s names %q, want stable %s", p, got, stable)
					}
				}
				if got := e.everRevision("configmap/app", rev); len(got) != 1 {
					t.Errorf("pods ever on the candidate: %v, want the first step's one", got)
				}
			})
		})
	}
}
