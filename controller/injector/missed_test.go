package injector

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/test/support/poll"
)

func podWith(ns, name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Annotations: annotations}}
}

// handWired gives p the sidecar as its manifest writes it, without the
// injector: a native sidecar named hotreload.
func handWired(p *corev1.Pod) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{{Name: controller.SidecarContainer, RestartPolicy: &always}}
	return p
}

// The pods that opted in and run without the sidecar are found in the
// controller's pod informer (trimmed as the controller trims it), counted
// in the gauge by every replica (per namespace), and reported once each by
// the leader: an Event on the pod, the counter, a log line.
func TestMissedInjections(t *testing.T) {
	injected := map[string]string{AnnotationReloadURL: "http://127.0.0.1:9090/-/reload", AnnotationInjected: "native"}
	ti := newTestInjector(t, true)
	ctx := context.Background()
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := ti.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{
		podWith("shop", "with-sidecar", injected),
		podWith("shop", "missed", reloadURL()),
		podWith("shop", "bad", map[string]string{AnnotationSignal: "SIGNOPE"}),
		podWith("shop", "plain", nil),
		podWith("shop", "opted-out", map[string]string{AnnotationRestart: "false"}),
		handWired(podWith("shop", "hand-wired", map[string]string{AnnotationRestart: "true"})),
		handWired(podWith("shop", "hand-wired-plain", map[string]string{AnnotationSignal: "SIGNOPE"})),
		podWith("kube-system", "system", reloadURL()),
		podWith("hotreload-system", "self", reloadURL()),
	} {
		create(p)
	}
	// The controller's pod informer of every namespace, as controller.New
	// gives it to its parts.
	pods := ti.client.CoreV1().Pods("")
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
	}, ti.client), &corev1.Pod{}, 0, cache.Indexers{})
	if err := inf.SetTransform(controller.TrimPod); err != nil {
		t.Fatal(err)
	}
	if err := ti.Attach(controller.Scope{Pods: inf}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { inf.RunWithContext(runCtx) })

	if !poll.Until(5*time.Second, func() bool { return ti.missed.count() == 2 }) {
		t.Fatalf("%v pods missing, want 2 (missed, bad)", ti.missed.count())
	}
	// A follower reports nothing; the leader each pod once.
	if n := testutil.ToFloat64(ti.m.missed); n != 0 {
		t.Errorf("counted %v before leading", n)
	}
	if n := ti.missed.report(); n != 2 {
		t.Errorf("reported %d, want 2", n)
	}
	events := ti.drainEvents()
	if len(events) != 2 {
		t.Fatalf("events %q", events)
	}
	joined := strings.Join(events, "\n")
	for _, want := range []string{
		"Warning HotreloadSidecarMissing opted in to hotreload but runs without its sidecar: the injector did not add it: its webhook could not be reached",
		`Warning HotreloadSidecarMissing opted in to hotreload but runs without its sidecar: its annotations do not parse: hotreload.dev/signal "SIGNOPE": unknown signal`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("no event %q in %q", want, events)
		}
	}
	if ti.missed.report() != 0 || testutil.ToFloat64(ti.m.missed) != 2 {
		t.Errorf("reported again, or counted %v", testutil.ToFloat64(ti.m.missed))
	}

	// A new pod admitted without the injector is found and reported; a
	// deleted one leaves the gauge.
	create(podWith("shop", "late", reloadURL()))
	if err := ti.client.CoreV1().Pods("shop").Delete(ctx, "missed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !poll.Until(5*time.Second, func() bool { return ti.missed.count() == 2 && ti.missed.report() == 1 }) {
		t.Fatalf("%v missing", ti.missed.count())
	}
	if n := testutil.ToFloat64(ti.m.missed); n != 3 {
		t.Errorf("counted %v, want 3", n)
	}
	want := `# HELP hotreload_controller_injection_missed_pods Pods that opted in to hotreload and run without its sidecar now, by namespace, as this replica sees them.
# TYPE hotreload_controller_injection_missed_pods gauge
hotreload_controller_injection_missed_pods{pod_namespace="shop"} 2
`
	if err := testutil.GatherAndCompare(ti.reg, strings.NewReader(want), "hotreload_controller_injection_missed_pods"); err != nil {
		t.Error(err)
	}
}
