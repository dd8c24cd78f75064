package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
)

func TestMain(m *testing.M) {
	// client-go's leader election logs through klog: keep test output to
	// the tests' own lines.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}

const ns = "default"

// podOpt changes a test pod.
type podOpt func(*corev1.Pod)

func mountConfigMap(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cm-" + name, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}})
	}
}

func mountSecret(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "secret-" + name, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: name}}})
	}
}

func mountProjected(cms, secrets []string) podOpt {
	return func(p *corev1.Pod) {
		var src []corev1.VolumeProjection
		for _, n := range cms {
			src = append(src, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: n}}})
		}
		for _, n := range secrets {
			src = append(src, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: n}}})
		}
		src = append(src, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}})
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "projected", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: src}}})
	}
}

func notOptedIn(p *corev1.Pod)        { delete(p.Annotations, AnnotationNudge) }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func nudged(v string) podOpt          { return func(p *corev1.Pod) { p.Annotations[AnnotationNudged] = v } }
func inNamespace(n string) podOpt     { return func(p *corev1.Pod) { p.Namespace = n } }
func deleting(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	p.Finalizers = []string{"test"}
}
func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(name + "-uid"), ResourceVersion: "1",
			Annotations: map[string]string{AnnotationNudge: "true"},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func objectMeta(kind Kind, name, rv string) *metav1.PartialObjectMetadata {
	k := "ConfigMap"
	if kind == Secret {
		k = "Secret"
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: k},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: rv, UID: types.UID(name + "-uid")},
	}
}

func gvr(k Kind) schema.GroupVersionResource {
	if k == Secret {
		return secretsGVR
	}
	return configMapsGVR
}

// env is a controller on fake clients.
type env struct {
	t      testing.TB
	client *k8sfake.Clientset
	meta   *metafake.FakeMetadataClient
	reg    *prometheus.Registry
	logs   *binary.Buffer // the controller's log, at every level
	c      *Controller
	cancel context.CancelFunc
	done   chan error
}

func newEnv(t testing.TB, pods []*corev1.Pod, objects []*metav1.PartialObjectMetadata) *env {
	t.Helper()
	var ro []runtime.Object
	for _, p := range pods {
		ro = append(ro, p)
	}
	scheme := metafake.NewTestScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, client: k8sfake.NewClientset(ro...), meta: metafake.NewSimpleMetadataClient(scheme)}
	for _, o := range objects {
		kind := ConfigMap
		if o.Kind == "Secret" {
			kind = Secret
		}
		e.create(kind, o.Name, o.ResourceVersion)
	}
	return e
}

// start runs a controller on the env's clients until the test ends, and
// waits until it leads.
func (e *env) start(opts Options) *env {
	e.t.Helper()
	e.startNoWait(opts)
	waitUntil(e.t, "the controller leads", e.c.Leading)
	return e
}

func (e *env) startNoWait(opts Options) {
	e.t.Helper()
	opts.Pods, opts.Metadata, opts.Leases = fakePods{e.client.CoreV1()}, e.meta, e.client.CoordinationV1()
	if opts.Workers == 0 {
		// One worker handles the queue in order: once a later change is
		// done, every earlier one is, which lets a test show that something
		// did not happen without waiting for it.
		opts.Workers = 1
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](time.Millisecond, 10*time.Millisecond)
	}
	e.reg = prometheus.NewRegistry()
	e.logs = &binary.Buffer{}
	c, err := New(log.NewLogfmtLogger(e.logs), e.reg, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- c.Run(ctx) }()
	e.t.Cleanup(func() { e.stop() })
}

func (e *env) stop() error {
	e.cancel()
	err, ok := <-e.done
	if ok {
		close(e.done)
	}
	return err
}

// update gives an object a new resourceVersion, as any edit does.
func (e *env) update(kind Kind, name, rv string) {
	e.t.Helper()
	if _, err := e.meta.Resource(gvr(kind)).Namespace(ns).(metafake.MetadataClient).UpdateFake(objectMeta(kind, name, rv), metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) create(kind Kind, name, rv string) {
	e.t.Helper()
	if _, err := e.meta.Resource(gvr(kind)).Namespace(ns).(metafake.MetadataClient).CreateFake(objectMeta(kind, name, rv), metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// patches lists the nudge patches sent, as "pod=value", in order.
func patches(t testing.TB, client *k8sfake.Clientset) []string {
	t.Helper()
	var out []string
	for _, a := range client.Actions() {
		pa, ok := a.(k8stesting.PatchAction)
		if !ok || a.GetResource().Resource != "pods" {
			continue
		}
		var np nudgePatch
		if err := jsonUnmarshal(pa.GetPatch(), &np); err != nil {
			t.Fatalf("patch of %s: %v: %s", pa.GetName(), err, pa.GetPatch())
		}
		if pa.GetPatchType() != types.MergePatchType || len(np.Metadata.Annotations) != 1 || np.Metadata.UID == "" {
			t.Errorf("patch of %s is %s %s, want a merge patch of one annotation with the uid", pa.GetName(), pa.GetPatchType(), pa.GetPatch())
		}
		out = append(out, pa.GetName()+"="+np.Metadata.Annotations[AnnotationNudged])
	}
	return out
}

// wantNudges checks hotreload_controller_nudges_total{result}. The fake
// records a patch before the controller counts it: wait for the count to
// reach want, then check that it is not more.
func (e *env) wantNudges(result string, want float64) {
	e.t.Helper()
	c := e.c.m.nudges.WithLabelValues(result)
	waitUntil(e.t, fmt.Sprintf("%s nudges are counted", result), func() bool { return testutil.ToFloat64(c) >= want })
	if n := testutil.ToFloat64(c); n != want {
		e.t.Errorf("hotreload_controller_nudges_total{result=%q} = %v, want %v", result, n, want)
	}
}

// waitUntil waits until cond holds, failing the test after 10 seconds.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, cond, "waiting until %s", what)
}

// waitPatched waits until the patches sent include all of want, and returns
// them all.
func (e *env) waitPatched(want ...string) []string {
	e.t.Helper()
	var got []string
	waitUntil(e.t, fmt.Sprintf("patches %q are sent", want), func() bool {
		got = patches(e.t, e.client)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	})
	return got
}

// sentinel edits a ConfigMap that only the pod "sentinel" mounts and waits
// for its nudge: with one worker, every nudge queued before it is done.
func (e *env) sentinel(rv string) []string {
	e.t.Helper()
	e.update(ConfigMap, "sentinel", rv)
	got := e.waitPatched("sentinel=configmap/sentinel@" + rv)
	return slices.DeleteFunc(got, func(s string) bool { return strings.HasPrefix(s, "sentinel=") })
}

func sentinelPod() *corev1.Pod { return newPod("sentinel", mountConfigMap("sentinel")) }

func TestNudgesThePodsThatMountTheObject(t *testing.T) {
	tests := []struct {
		name  string
		kind  Kind
		mount podOpt
	}{
		{"configMap volume", ConfigMap, mountConfigMap("app")},
		{"secret volume", Secret, mountSecret("app")},
		{"projected ConfigMap source", ConfigMap, mountProjected([]string{"other", "app"}, nil)},
		{"projected Secret source", Secret, mountProjected(nil, []string{"app"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := Secret
			if tt.kind == Secret {
				other = ConfigMap
			}
			pods := []*corev1.Pod{
				newPod("a", tt.mount),
				newPod("b", tt.mount, mountConfigMap("unrelated")),
				newPod("not-opted-in", tt.mount, notOptedIn),
				newPod("pending", tt.mount, phase(corev1.PodPending)),
				newPod("succeeded", tt.mount, phase(corev1.PodSucceeded)),
				newPod("deleting", tt.mount, deleting),
				newPod("same-name-other-kind", func(p *corev1.Pod) {
					if other == Secret {
						mountSecret("app")(p)
					} else {
						mountConfigMap("app")(p)
					}
				}),
				newPod("other-namespace", tt.mount, inNamespace("elsewhere")),
				sentinelPod(),
			}
			e := newEnv(t, pods, []*metav1.PartialObjectMetadata{
				objectMeta(tt.kind, "app", "100"), objectMeta(other, "app", "100"),
				objectMeta(ConfigMap, "other", "100"), objectMeta(ConfigMap, "unrelated", "100"),
				objectMeta(ConfigMap, "sentinel", "100"),
			}).start(Options{})

			e.update(tt.kind, "app", "101")
			want := []string{"a=" + string(tt.kind) + "/app@101", "b=" + string(tt.kind) + "/app@101"}
			e.waitPatched(want...)
			got := e.sentinel("102")
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("patches = %q, want %q", got, want)
			}
			e.wantNudges(ResultPatched, 3)
		})
	}
}

func TestInitialListDoesNotNudge(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{
		newPod("never-nudged", mountConfigMap("app"), mountSecret("tls")),
		newPod("current", mountConfigMap("app"), nudged("configmap/app@120")),
		newPod("current-other-kind", mountConfigMap("app"), mountSecret("tls"), nudged("secret/tls@90")),
		newPod("projected", mountProjected([]string{"app"}, []string{"tls"})),
		sentinelPod(),
	}, []*metav1.PartialObjectMetadata{
		objectMeta(ConfigMap, "app", "120"), objectMeta(Secret, "tls", "90"), objectMeta(ConfigMap, "sentinel", "100"),
	}).start(Options{})
	if got := e.sentinel("121"); len(got) != 0 {
		t.Errorf("start patched %q, want nothing: every pod is current", got)
	}
	if n := testutil.ToFloat64(e.c.m.leader); n != 1 {
		t.Errorf("hotreload_controller_leader = %v, want 1", n)
	}
	e.wantNudges(ResultPatched, 1) // the sentinel
}

// TestCatchUpOnLeading is a failover: the pods show the last nudge of the
// previous leader, and an object changed before this replica took over.
func TestCatchUpOnLeading(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{
		newPod("behind", mountConfigMap("app"), nudged("configmap/app@100")),
		newPod("current", mountConfigMap("app"), nudged("configmap/app@120")),
		// Nudged for the Secret last: the ConfigMap is taken as current
		// (nothing says otherwise), the Secret is behind.
		newPod("secret-behind", mountConfigMap("app"), mountSecret("tls"), nudged("secret/tls@130")),
		newPod("not-opted-in", mountConfigMap("app"), nudged("configmap/app@100"), notOptedIn),
		newPod("pending", mountConfigMap("app"), nudged("configmap/app@100"), phase(corev1.PodPending)),
		// A version the API server did not make: compared for equality only.
		newPod("opaque", mountConfigMap("opaque"), nudged("configmap/opaque@abc")),
		sentinelPod(),
	}, []*metav1.PartialObjectMetadata{
		objectMeta(ConfigMap, "app", "120"), objectMeta(Secret, "tls", "140"),
		objectMeta(ConfigMap, "opaque", "abd"), objectMeta(ConfigMap, "sentinel", "100"),
	}).start(Options{})

	want := []string{"behind=configmap/app@120", "opaque=configmap/opaque@abd", "secret-behind=secret/tls@140"}
	got := e.sentinel("200")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("catch-up patched %q, want %q", got, want)
	}
}

// TestFailover runs two replicas on one Lease: the standby learns the
// leader's nudges from the pods, takes over when the leader stops, and
// nudges what changed meanwhile, without repeating the leader's nudges.
func TestFailover(t *testing.T) {
	pods := []*corev1.Pod{newPod("a", mountConfigMap("app")), newPod("b", mountConfigMap("app"), mountSecret("tls")), sentinelPod()}
	objects := []*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100"), objectMeta(Secret, "tls", "100"), objectMeta(ConfigMap, "sentinel", "100")}
	le := func(id string) *LeaderElection {
		return &LeaderElection{Namespace: "hotreload-system", Name: "hotreload-controller", Identity: id,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 50 * time.Millisecond}
	}
	first := newEnv(t, pods, objects)
	first.start(Options{LeaderElection: le("first")})
	second := &env{t: t, client: first.client, meta: first.meta}
	second.startNoWait(Options{LeaderElection: le("second")})
	waitUntil(t, "the second replica has synced", second.c.Ready)
	if second.c.Leading() {
		t.Fatal("both replicas lead")
	}

	first.update(Secret, "tls", "101")
	first.waitPatched("b=secret/tls@101")
	first.update(ConfigMap, "app", "102")
	first.waitPatched("a=configmap/app@102", "b=configmap/app@102")
	if err := first.stop(); err != nil {
		t.Fatalf("leader stopped with %v", err)
	}
	// The edit during the failover: the second replica may or may not lead
	// yet; either way it must nudge it.
	first.update(Secret, "tls", "103")
	waitUntil(t, "the second replica leads", second.c.Leading)
	second.waitPatched("b=secret/tls@103")
	second.sentinel("104")
	got := patches(t, first.client)
	want := []string{"b=secret/tls@101", "a=configmap/app@102", "b=configmap/app@102", "b=secret/tls@103", "sentinel=configmap/sentinel@104"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("patches = %q, want %q: each change once", got, want)
	}
	second.wantNudges(ResultPatched, 2)
}

func TestPodThatStartsRunningDuringAnEditIsNudged(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{newPod("starting", mountConfigMap("app"), phase(corev1.PodPending)), sentinelPod()},
		[]*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100"), objectMeta(ConfigMap, "sentinel", "100")}).start(Options{})
	e.update(ConfigMap, "app", "101")
	if got := e.sentinel("102"); len(got) != 0 {
		t.Fatalf("patched %q while the pod was pending", got)
	}
	p := newPod("starting", mountConfigMap("app"))
	if _, err := e.client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPatched("starting=configmap/app@101")
}

func TestNewObjectNudgesAndDeletedDoesNot(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{newPod("optional", mountConfigMap("later")), sentinelPod()},
		[]*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "sentinel", "100")}).start(Options{})
	e.create(ConfigMap, "later", "150")
	e.waitPatched("optional=configmap/later@150")
	// Deleted: the kubelet keeps the last content of a volume whose object
	// is gone, so there is nothing to deliver.
	if err := e.meta.Resource(configMapsGVR).Namespace(ns).Delete(context.Background(), "later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the deletion reaches the cache", func() bool { _, ok := e.c.version(e.c.scope(ns), ObjectKey{ConfigMap, ns, "later"}); return !ok })
	if got := e.sentinel("151"); !slices.Equal(got, []string{"optional=configmap/later@150"}) {
		t.Errorf("patches = %q, want only the one for the new object: the deletion nudged", got)
	}
	// Created again: a new object, nudged.
	e.create(ConfigMap, "later", "160")
	e.waitPatched("optional=configmap/later@160")
}

func TestConfigMapsOnly(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app"), mountSecret("tls")), sentinelPod()},
		[]*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100"), objectMeta(Secret, "tls", "100"), objectMeta(ConfigMap, "sentinel", "100")}).
		start(Options{ConfigMapsOnly: true})
	e.update(Secret, "tls", "101")
	e.update(ConfigMap, "app", "102")
	e.waitPatched("a=configmap/app@102")
	if got := e.sentinel("103"); !slices.Equal(got, []string{"a=configmap/app@102"}) {
		t.Errorf("patches = %q, want the ConfigMap's only", got)
	}
	// It never asks the API server for Secrets, not even their metadata.
	for _, a := range e.meta.Actions() {
		if a.GetResource().Resource == "secrets" && a.GetVerb() != "create" && a.GetVerb() != "update" {
			t.Errorf("%s secrets: with ConfigMapsOnly the controller needs no access to Secrets", a.GetVerb())
		}
	}
}

func TestFailedPatchIsRetried(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app")), newPod("gone", mountConfigMap("app")), sentinelPod()},
		[]*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100"), objectMeta(ConfigMap, "sentinel", "100")})
	var mu sync.Mutex
	failures := 0
	e.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		switch name := a.(k8stesting.PatchAction).GetName(); {
		case name == "gone":
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
		case name == "a" && failures < 3:
			failures++
			return true, nil, errors.New("injected: connection refused")
		}
		return false, nil, nil
	})
	e.start(Options{})
	e.update(ConfigMap, "app", "101")
	e.waitPatched("a=configmap/app@101")
	e.wantNudges(ResultPatched, 1)
	// Pod a was tried 4 times; the pod that the API server says is gone,
	// once.
	e.wantNudges(ResultFailed, 3)
	e.wantNudges(ResultGone, 1)
}

func TestLagIsMeasuredFromTheChange(t *testing.T) {
	// The clock stands still but for the patch, which takes a quarter
	// second: the lag is that, from the change seen to the patch done.
	var mu sync.Mutex
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app"))}, []*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100")})
	e.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(250 * time.Millisecond)
		return false, nil, nil
	})
	e.start(Options{Now: clock})
	e.update(ConfigMap, "app", "101")
	e.waitPatched("a=configmap/app@101")
	waitUntil(t, "the lag is observed", func() bool { return testutil.CollectAndCount(e.c.m.lag) == 1 && histogramCount(t, e.reg) == 1 })
	if sum := histogramSum(t, e.reg); sum != 0.25 {
		t.Errorf("hotreload_controller_nudge_lag_seconds sum = %v, want 0.25 (the patch's time)", sum)
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry) uint64 {
	h := histogram(t, reg)
	if h == nil {
		return 0
	}
	return h.GetSampleCount()
}

func histogramSum(t *testing.T, reg *prometheus.Registry) float64 {
	return histogram(t, reg).GetSampleSum()
}

func TestQueueDepthAndPodsMetrics(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app")), newPod("b", mountConfigMap("app"), notOptedIn)},
		[]*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100")}).start(Options{})
	err := testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP hotreload_controller_pods Pods that opted in with the hotreload.dev/nudge annotation, running or not.
# TYPE hotreload_controller_pods gauge
hotreload_controller_pods 1
# HELP hotreload_controller_queue_depth Pods queued to be nudged now; pods that wait for a burst of changes to settle are not counted.
# TYPE hotreload_controller_queue_depth gauge
hotreload_controller_queue_depth 0
`), "hotreload_controller_pods", "hotreload_controller_queue_depth")
	if err != nil {
		t.Error(err)
	}
}

func TestNamespaces(t *testing.T) {
	e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app")), newPod("b", mountConfigMap("app"), inNamespace("elsewhere"))},
		[]*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100")}).start(Options{Namespaces: []string{"elsewhere", ns, ns}})
	if len(e.c.scopes) != 2 {
		t.Errorf("%d scopes, want 2: the namespaces, each once", len(e.c.scopes))
	}
	e.update(ConfigMap, "app", "101")
	e.waitPatched("a=configmap/app@101")
}

func TestNewChecksOptions(t *testing.T) {
	e := newEnv(t, nil, nil)
	for name, opts := range map[string]Options{
		"no clients":    {},
		"no metadata":   {Pods: e.client.CoreV1()},
		"no lease name": {Pods: e.client.CoreV1(), Metadata: e.meta, Leases: e.client.CoordinationV1(), LeaderElection: &LeaderElection{Namespace: "x", Identity: "me"}},
		"no identity":   {Pods: e.client.CoreV1(), Metadata: e.meta, Leases: e.client.CoordinationV1(), LeaderElection: &LeaderElection{Namespace: "x", Name: "l"}},
		"no lease ns":   {Pods: e.client.CoreV1(), Metadata: e.meta, Leases: e.client.CoordinationV1(), LeaderElection: &LeaderElection{Name: "l", Identity: "me"}},
		"no leases":     {Pods: e.client.CoreV1(), Metadata: e.meta, LeaderElection: &LeaderElection{Namespace: "x", Name: "l", Identity: "me"}},
	} {
		if _, err := New(nil, prometheus.NewRegistry(), opts); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
}
