package rollout

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotreload/hotreload/test/support/poll"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// Two replicas that both believe they lead decide from the same status
// at the same instant: one to promote (its pods look healthy at the end
// of the bake), the other to abort (the same pod reports a rejection from
// then on). Each writes its decision with the status's resourceVersion as
// the precondition, so only one lands; the other re-reads and follows it.
// Without the precondition both land: the test fails (see the subtest).
// The two replicas' reads at the end of the bake meet, so that they decide
// from the same status every time.
func TestTwoLeadersCannotBothPromoteAndAbort(t *testing.T) {
	for _, unconditional := range []bool{false, true} {
		name := "with preconditions"
		if unconditional {
			name = "without them, both would land"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				if unconditional {
					// Status writes that ignore the resourceVersion, as an
					// Update that does not carry it would.
					e.dyn.PrependReactor("update", "configrollouts", func(a k8stesting.Action) (bool, runtime.Object, error) {
						if u, ok := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured); ok {
							cur, err := e.dyn.Tracker().Get(GVR, u.GetNamespace(), u.GetName())
							if err == nil {
								u.SetResourceVersion(cur.(*unstructured.Unstructured).GetResourceVersion())
							}
						}
						return false, nil, nil
					})
				}
				e.configMap("app", map[string]string{"app.yaml": "v: 1"})
				e.pod("app-00", "app")
				e.pod("app-01", "app")
				e.rollout("app", "app", []string{"100%"}, "10s")

				var (
					bakeEnd   time.Time
					candidate string
					mu        sync.Mutex
					arrived   = map[string]bool{}
					met       = make(chan struct{})
				)
				// meet holds each replica's reads at the end of the bake until
				// the other's have come too, so that both decide from the
				// same status: one to promote, the other to abort.
				meet := func(replica string) bool {
					mu.Lock()
					end := bakeEnd
					if end.IsZero() || time.Now().Before(end) {
						mu.Unlock()
						return false
					}
					if !arrived[replica] {
						arrived[replica] = true
						if len(arrived) == 2 {
							close(met)
						}
					}
					mu.Unlock()
					select {
					case <-met:
					case <-time.After(5 * time.Second):
					}
					return true
				}
				promoting := func(ctx context.Context, p *corev1.Pod, ref string) (*Report, error) {
					meet("promoting")
					return e.report(ctx, p, ref)
				}
				rejecting := func(ctx context.Context, p *corev1.Pod, ref string) (*Report, error) {
					r, err := e.report(ctx, p, ref)
					mu.Lock()
					cand := candidate
					mu.Unlock()
					if meet("rejecting") && err == nil && r.Want == cand {
						r.Result, r.Rejected, r.Running, r.Error = ResultRejected, r.Want, "", "refused"
					}
					return r, err
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				defer func() { cancel(); wg.Wait() }()
				e.start(Options{Report: promoting})
				e.controller(ctx, &wg, Options{Report: rejecting})
				stable := e.waitPhase("app", PhaseHealthy, time.Minute).Status.StableRevision

				rev := e.edit("app", map[string]string{"app.yaml": "v: 2"})
				mu.Lock()
				candidate = rev
				mu.Unlock()
				var r *ConfigRollout
				poll.EventuallyEvery(t, 10*time.Millisecond, time.Minute, func() bool {
					r = e.get("app")
					return r.Status.BakeStartedAt != nil
				}, func() string { return fmt.Sprintf("no bake: %+v", r.Status) })
				mu.Lock()
				bakeEnd = r.Status.BakeStartedAt.Add(10 * time.Second)
				mu.Unlock()
				time.Sleep(30 * time.Second)
				synctest.Wait()

				r = e.get("app")
				res, data := e.stable("app")
				revs := e.revisions("configmap/app")
				consistent := false
				switch r.Status.Phase {
				case PhaseHealthy:
					consistent = r.Status.StableRevision == rev && res.Stable.Revision == rev && data["app.yaml"] == "v: 2" && revs["app-00"] == rev && revs["app-01"] == rev
				case PhaseAborted:
					consistent = r.Status.StableRevision == stable && res.Stable.Revision == stable && data["app.yaml"] == "v: 1" && revs["app-00"] == stable && revs["app-01"] == stable
				}
				both := e.hasEvent("ConfigRollout", "RolloutPromoted", rev) && e.hasEvent("ConfigRollout", "RolloutAborted", rev)
				if unconditional {
					if !both {
						t.Errorf("without preconditions only one decision landed (phase %s): the test does not make the two replicas race", r.Status.Phase)
					}
					return
				}
				if both {
					t.Errorf("both a promotion and an abort of %s were recorded: %v", rev, e.events())
				}
				if !consistent {
					t.Errorf("phase %s stable %s; stable copy %+v %v; pods %v: not one decision's outcome", r.Status.Phase, r.Status.StableRevision, res, data, revs)
				}
			})
		})
	}
}
