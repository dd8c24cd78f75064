package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	metafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/internal/revision"
	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/fakeapi"
	"github.com/hotreload/hotreload/test/support/poll"
)

const ns = "shop"

// env is hotreload-controller with its rollout part on fake clients that
// check resourceVersions as the API server does, and a model of the pods'
// sidecars: each reports the revision its annotation names as applied,
// unless the test says otherwise.
type env struct {
	t    *testing.T
	core *k8sfake.Clientset
	meta *metafake.FakeMetadataClient
	dyn  *dynfake.FakeDynamicClient
	logs *binary.Buffer
	reg  *prometheus.Registry

	mu       sync.Mutex
	rejects  map[string]bool          // revisions every sidecar refuses
	behave   map[string]func(*Report) // per pod: change its report
	unready  map[string]bool          // pods whose readiness the test turns off
	queryVal float64
	queryErr error
	scrapes  int
	// restartModel, if set, reports restarting pods as pending.
	restartModel *kubelet
}

func newEnv(t *testing.T) *env {
	t.Helper()
	scheme := metafake.NewTestScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	e := &env{
		t: t, core: k8sfake.NewClientset(), meta: metafake.NewSimpleMetadataClient(scheme),
		dyn:     dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{GVR: "ConfigRolloutList"}),
		logs:    &binary.Buffer{},
		rejects: map[string]bool{}, behave: map[string]func(*Report){}, unready: map[string]bool{},
	}
	fakeapi.Concurrency(e.core)
	fakeapi.Concurrency(e.dyn)
	// The recorder names an Event by its object's name and the time in
	// nanoseconds, which in virtual time is the same for the Events of
	// one decision: number them instead.
	var n atomic.Int64
	e.core.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ev, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Event); ok {
			ev.Name = fmt.Sprintf("%s.%d", ev.InvolvedObject.Name, n.Add(1))
		}
		return false, nil, nil
	})
	return e
}

// fakeCore makes the pod informer list instead of asking for a watch's
// initial events, which the fake cannot send.
type fakeCore struct{ corev1client.CoreV1Interface }

func (fakeCore) IsWatchListSemanticsUnSupported() bool { return true }

// start runs the controller (no leader election: it leads) until the test
// ends, and mirrors the ConfigMaps and Secrets the fake holds into the
// metadata fake, as the API server serves both from one store.
func (e *env) start(opts Options) *Controller {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, res := range []string{"configmaps", "secrets"} {
		var w watch.Interface
		var err error
		if res == "configmaps" {
			w, err = e.core.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
		} else {
			w, err = e.core.CoreV1().Secrets("").Watch(ctx, metav1.ListOptions{})
		}
		if err != nil {
			e.t.Fatal(err)
		}
		wg.Go(func() { e.mirror(ctx, w) })
	}
	c := e.controller(ctx, &wg, opts)
	e.t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c
}

// controller runs one more replica on the same clients.
func (e *env) controller(ctx context.Context, wg *sync.WaitGroup, opts Options) *Controller {
	e.t.Helper()
	opts.Core = fakeCore{e.core.CoreV1()}
	opts.Dynamic = e.dyn
	if opts.Report == nil {
		opts.Report = e.report
	}
	if opts.Query == nil {
		opts.Query = func(context.Context, *Query) (float64, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.queryVal, e.queryErr
		}
	}
	e.reg = prometheus.NewRegistry()
	logger := log.With(log.NewLogfmtLogger(e.logs), "ts", log.DefaultTimestampUTC)
	rc, err := New(logger, e.reg, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	nc, err := controller.New(logger, prometheus.NewRegistry(), controller.Options{
		Pods: fakeCore{e.core.CoreV1()}, Metadata: e.meta, Parts: []controller.Part{rc}, Workers: 1,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	wg.Go(func() { _ = nc.Run(ctx) })
	return rc
}

func (e *env) mirror(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			m, ok := ev.Object.(metav1.Object)
			if !ok {
				continue
			}
			kind, res := "ConfigMap", "configmaps"
			if _, ok := ev.Object.(*corev1.Secret); ok {
				kind, res = "Secret", "secrets"
			}
			pm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
				ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(), Labels: m.GetLabels()}}
			mc := e.meta.Resource(schema.GroupVersionResource{Version: "v1", Resource: res}).Namespace(m.GetNamespace()).(metafake.MetadataClient)
			switch ev.Type {
			case watch.Added:
				_, _ = mc.CreateFake(pm, metav1.CreateOptions{})
			case watch.Modified:
				_, _ = mc.UpdateFake(pm, metav1.UpdateOptions{})
			case watch.Deleted:
				_ = e.meta.Resource(schema.GroupVersionResource{Version: "v1", Resource: res}).Namespace(m.GetNamespace()).Delete(ctx, m.GetName(), metav1.DeleteOptions{})
			}
		}
	}
}

// report is the model of a pod's sidecar: it runs what the annotation
// names (stable when none) and reports it applied, or rejected for a
// revision in e.rejects (running stable then).
func (e *env) report(_ context.Context, p *corev1.Pod, ref string) (*Report, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scrapes++
	want := Revisions(p)[ref]
	r := &Report{Want: want, Running: want, Result: ResultApplied}
	if e.rejects[want] {
		r.Running, r.Result, r.Rejected, r.Error = "", ResultRejected, want, "POST http://127.0.0.1:9090/-/reload: status 500"
	}
	if k := e.restartModel; k != nil {
		k.report(p, r)
	}
	if f := e.behave[p.Name]; f != nil {
		f(r)
	}
	return r, nil
}

func (e *env) configMap(name string, data map[string]string) *corev1.ConfigMap {
	e.t.Helper()
	cm, err := e.core.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid")}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm
}

// edit sets the ConfigMap's data and returns its new resourceVersion.
func (e *env) edit(name string, data map[string]string) string {
	e.t.Helper()
	cm, err := e.core.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cm.Data = data
	cm, err = e.core.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm.ResourceVersion
}

type podOpt func(*corev1.Pod)

func restartPod(p *corev1.Pod) {
	p.Annotations[controller.AnnotationRestart] = "true"
	t := true
	p.Spec.ShareProcessNamespace = &t
}

func ownedBy(uid string) podOpt {
	return func(p *corev1.Pod) {
		t := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: types.UID(uid), Controller: &t}}
	}
}

// pod creates a running, Ready pod in rollout mode that mounts source and
// its stable copy.
func (e *env) pod(name, source string, opts ...podOpt) {
	e.t.Helper()
	t := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid"),
			Annotations: map[string]string{controller.AnnotationRollout: "true"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "app"}, {Name: "hotreload", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9533}}}},
			Volumes: []corev1.Volume{
				{Name: "source", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: source}}}},
				{Name: "stable", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: source + StableSuffix}, Optional: &t}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}, {Name: "hotreload", Ready: true}}},
	}
	for _, o := range opts {
		o(p)
	}
	if _, err := e.core.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// setPod changes a pod's status as the kubelet would.
func (e *env) setPod(name string, f func(*corev1.Pod)) {
	e.t.Helper()
	p, err := e.core.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	f(p)
	if _, err := e.core.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) rollout(name, source string, steps []string, bake string, mod ...func(*Spec)) {
	e.t.Helper()
	r := &ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: Spec{Source: SourceRef{Kind: "ConfigMap", Name: source}, Steps: steps, BakeTime: bake}}
	for _, m := range mod {
		m(&r.Spec)
	}
	if _, err := NewClient(e.dyn).Create(context.Background(), r); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) get(name string) *ConfigRollout {
	e.t.Helper()
	r, err := NewClient(e.dyn).Get(context.Background(), ns, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// revisions returns every pod's revision of ref, by pod name.
func (e *env) revisions(ref string) map[string]string {
	e.t.Helper()
	list, err := e.core.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = Revisions(&p)[ref]
	}
	return out
}

// stable reads a stable copy: its reserved key and its other data.
func (e *env) stable(source string) (Reserved, map[string]string) {
	e.t.Helper()
	cm, err := e.core.CoreV1().ConfigMaps(ns).Get(context.Background(), source+StableSuffix, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := ParseReserved([]byte(cm.Data[revision.ReservedKey]))
	if err != nil {
		e.t.Fatal(err)
	}
	data := maps.Clone(cm.Data)
	delete(data, revision.ReservedKey)
	return r, data
}

// everRevision lists the pods ever patched to rev, from the fake's
// record of actions.
func (e *env) everRevision(ref, rev string) []string {
	var out []string
	for _, a := range e.core.Actions() {
		pa, ok := a.(k8stesting.PatchAction)
		if !ok || a.GetResource().Resource != "pods" {
			continue
		}
		var p struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(pa.GetPatch(), &p)
		revs := map[string]string{}
		_ = json.Unmarshal([]byte(p.Metadata.Annotations[controller.AnnotationRevisions]), &revs)
		if revs[ref] == rev && !slices.Contains(out, pa.GetName()) {
			out = append(out, pa.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// events lists the Events recorded, as "Reason: message".
func (e *env) events() []string {
	list, err := e.core.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, fmt.Sprintf("%s %s/%s: %s", ev.InvolvedObject.Kind, ev.Reason, ev.InvolvedObject.Name, ev.Message))
	}
	slices.Sort(out)
	return out
}

func (e *env) hasEvent(kind, reason, substr string) bool {
	for _, ev := range e.events() {
		if strings.HasPrefix(ev, kind+" "+reason+"/") && strings.Contains(ev, substr) {
			return true
		}
	}
	return false
}

// waitPhase waits (in virtual time) until the rollout is in phase.
func (e *env) waitPhase(name, phase string, within time.Duration) *ConfigRollout {
	e.t.Helper()
	var r *ConfigRollout
	poll.EventuallyEvery(e.t, 100*time.Millisecond, within, func() bool {
		r = e.get(name)
		return r.Status.Phase == phase
	}, func() string {
		return fmt.Sprintf("rollout %s: phase %q (%s), want %s\nlog:\n%s", name, r.Status.Phase, r.Status.Message, phase, e.logs.String())
	})
	return r
}

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

func metav1UpdateOptions() metav1.UpdateOptions { return metav1.UpdateOptions{} }
