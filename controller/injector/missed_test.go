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
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/hotreload/hotreload/internal/poll"
)

func podMeta(ns, name string, annotations map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Annotations: annotations},
	}
}

// The pods that opted in and run without the sidecar are found through a
// metadata watch, counted in the gauge by every replica (per namespace), and reported once
// each by the leader: an Event on the pod, the counter, a log line.
func TestMissedInjections(t *testing.T) {
	injected := map[string]string{AnnotationReloadURL: "http://127.0.0.1:9090/-/reload", AnnotationInjected: "native"}
	scheme := metadatafake.NewTestScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme)
	create := func(p *metav1.PartialObjectMetadata) {
		t.Helper()
		if _, err := meta.Resource(podsGVR).Namespace(p.Namespace).(metadatafake.MetadataClient).CreateFake(p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*metav1.PartialObjectMetadata{
		podMeta("shop", "with-sidecar", injected),
		podMeta("shop", "missed", reloadURL()),
		podMeta("shop", "bad", map[string]string{AnnotationSignal: "SIGNOPE"}),
		podMeta("shop", "plain", nil),
		podMeta("shop", "opted-out", map[string]string{AnnotationRestart: "false"}),
		podMeta("kube-system", "system", reloadURL()),
		podMeta("hotreload-system", "self", reloadURL()),
	} {
		create(p)
	}
	ti := newTestInjector(t, true)
	ti.opts.Metadata = meta
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = ti.Run(ctx) })

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
	pods := meta.Resource(podsGVR).Namespace("shop")
	create(podMeta("shop", "late", reloadURL()))
	if err := pods.Delete(ctx, "missed", metav1.DeleteOptions{}); err != nil {
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

func TestTrimPodMetadata(t *testing.T) {
	in := podMeta("shop", "p", map[string]string{AnnotationReloadURL: "u", "kubectl.kubernetes.io/last-applied-configuration": "{...}"})
	in.Labels = map[string]string{"app": "x"}
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := TrimPodMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.Name != "p" || m.UID != in.UID || len(m.Annotations) != 1 || m.Labels != nil || m.ManagedFields != nil {
		t.Errorf("%+v", m)
	}
}
