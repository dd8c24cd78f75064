package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const leaseNS, leaseName = "hotreload-system", "hotreload-controller"

// TestResumedLeaderStopsAtItsNextRenewal plays a leader that froze while
// another replica took the Lease over: when it next renews, it reads the
// Lease, sees the other holder and stops leading at once, not when its
// renew deadline (here 30 s) passes, as client-go alone would.
func TestResumedLeaderStopsAtItsNextRenewal(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app")), sentinelPod()},
		[]*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100"), objectMeta(ConfigMap, "sentinel", "100")})
	apiServerConcurrency(e.client)
	// A part's work of the leader's (the injector's certificates) runs
	// while it leads, and stops with it.
	part := &leadPart{}
	e.start(Options{LeaderElection: &LeaderElection{Namespace: leaseNS, Name: leaseName, Identity: "frozen",
		LeaseDuration: time.Minute, RenewDeadline: 30 * time.Second, RetryPeriod: 50 * time.Millisecond},
		Parts: []Part{part}})
	waitUntil(t, "the part's Lead starts", part.leading.Load)
	e.update(ConfigMap, "app", "101")
	e.waitPatched("a=configmap/app@101")

	// The other replica takes the Lease, as it may once the frozen leader's
	// lease duration has passed.
	leases := e.client.CoordinationV1().Leases(leaseNS)
	l, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NowMicro()
	l.Spec.HolderIdentity = ptr.To("other")
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitUntil(t, "the resumed leader stops leading", func() bool { return !e.c.Leading() })
	waitUntil(t, "the part's Lead returns", part.stopped.Load)
	t.Logf("stopped leading %s after the Lease changed hands (renew deadline 30s)", time.Since(start).Round(time.Millisecond))
	if got := logLines(e.logs, "level=warn", `msg="another replica holds the lease, no longer leading"`, "holder=other"); len(got) != 1 {
		t.Errorf("%d lines say why it stopped, want 1", len(got))
	}
	if n := testutil.ToFloat64(e.c.m.leader); n != 0 {
		t.Errorf("hotreload_controller_leader = %v, want 0", n)
	}
	// It no longer nudges.
	e.update(ConfigMap, "app", "102")
	e.update(ConfigMap, "sentinel", "103")
	time.Sleep(200 * time.Millisecond)
	for _, p := range patches(t, e.client) {
		if p != "a=configmap/app@101" {
			t.Errorf("patched %s after it stopped leading", p)
		}
	}
}

// TestLeaseErrorsAreOneWarning: a Lease that the controller may not read
// (RBAC) is retried every retry period, and said once.
func TestLeaseErrorsAreOneWarning(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, leaseName, errors.New("RBAC: not allowed"))
	})
	e.startNoWait(Options{WarnInterval: time.Hour, LeaderElection: &LeaderElection{Namespace: leaseNS, Name: leaseName, Identity: "me",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 10 * time.Millisecond}})
	errs := e.c.m.apiErrors.WithLabelValues("get", "leases")
	waitUntil(t, "five failed reads of the Lease", func() bool { return testutil.ToFloat64(errs) >= 5 })
	got := logLines(e.logs, "level=warn")
	if len(got) != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", len(got), got)
	}
	for _, want := range []string{`msg="API call failed, retrying every 10ms"`, `call="get leases"`, "RBAC: not allowed", `hint="its RBAC does not allow this`} {
		if !strings.Contains(got[0], want) {
			t.Errorf("warning %s lacks %s", got[0], want)
		}
	}
	if e.c.Leading() {
		t.Error("leads without the Lease")
	}
}

// TestPatchErrorsAreOneWarning: pod patches that all fail (here forbidden,
// as an admission policy or RBAC would) make one warning, not one per pod
// and retry, and each pod is left to the kubelet after MaxRetries.
func TestPatchErrorsAreOneWarning(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 5 {
		pods = append(pods, newPod(fmt.Sprintf("p%d", i), mountConfigMap("app")))
	}
	e := newEnv(t, pods, []*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100")})
	e.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, a.(k8stesting.PatchAction).GetName(), errors.New("denied by policy"))
	})
	e.start(Options{MaxRetries: 3, Workers: 2})
	e.update(ConfigMap, "app", "101")
	waitUntil(t, "every pod is given up", func() bool { return testutil.ToFloat64(e.c.m.givenUp) == 5 })
	if n := testutil.ToFloat64(e.c.m.apiErrors.WithLabelValues("patch", "pods")); n != 20 {
		t.Errorf("%v failed patches counted, want 20: 5 pods, each tried 4 times", n)
	}
	e.wantNudges(ResultFailed, 20)
	got := logLines(e.logs, "level=warn")
	if len(got) != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", len(got), got)
	}
	for _, want := range []string{`call="patch pods"`, "denied by policy", "left to the kubelet's periodic sync after 3 tries", "failures=1", `hint="its RBAC or an admission policy refuses the patch`} {
		if !strings.Contains(got[0], want) {
			t.Errorf("warning %s lacks %s", got[0], want)
		}
	}
	if n := len(logLines(e.logs, "level=error")); n != 0 {
		t.Errorf("%d error lines", n)
	}
}

// leadPart is a Part with no informers whose Lead says when it runs.
type leadPart struct{ leading, stopped atomic.Bool }

func (p *leadPart) Attach(Scope) error                     { return nil }
func (p *leadPart) Informers() []cache.SharedIndexInformer { return nil }
func (p *leadPart) Lead(ctx context.Context) {
	p.leading.Store(true)
	<-ctx.Done()
	p.stopped.Store(true)
}
