package controller

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hotreload/hotreload/internal/binary"
)

// fakePods is the fake clientset's pods client, which, as the fake
// clientset itself does, tells the reflector that it cannot send a watch's
// initial events: the reflector then lists.
type fakePods struct{ corev1client.PodsGetter }

func (fakePods) IsWatchListSemanticsUnSupported() bool { return true }

// logLines returns the lines of a log that contain every one of substrs.
func logLines(log *binary.Buffer, substrs ...string) []string {
	var out []string
	for _, l := range strings.Split(log.String(), "\n") {
		if l != "" && !slices.ContainsFunc(substrs, func(s string) bool { return !strings.Contains(l, s) }) {
			out = append(out, l)
		}
	}
	return out
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// histogram is the lag histogram as gathered from reg, nil before any
// observation.
func histogram(t *testing.T, reg *prometheus.Registry) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "hotreload_controller_nudge_lag_seconds" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	return nil
}

// apiServerConcurrency makes the fake clientset check resourceVersions as
// the API server does: every write gives the object a new resourceVersion;
// an update, or a merge patch that names a resourceVersion, whose version
// is not the stored one fails with 409 Conflict. The fake on its own keeps
// the version an object was created with and applies every write.
func apiServerConcurrency(f *k8sfake.Clientset) {
	var mu sync.Mutex
	next := 1000
	bump := func() string {
		next++
		return strconv.Itoa(next)
	}
	stored := func(gvr schema.GroupVersionResource, ns, name string) (metav1.Object, error) {
		obj, err := f.Tracker().Get(gvr, ns, name)
		if err != nil {
			return nil, err
		}
		return meta.Accessor(obj)
	}
	conflict := func(a k8stesting.Action, name string) error {
		return apierrors.NewConflict(a.GetResource().GroupResource(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	react := k8stesting.ObjectReaction(f.Tracker())
	f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		switch a.GetVerb() {
		case "create":
			obj := a.(k8stesting.CreateAction).GetObject().DeepCopyObject()
			m, err := meta.Accessor(obj)
			if err != nil {
				return true, nil, err
			}
			m.SetResourceVersion(bump())
			return react(k8stesting.NewCreateAction(a.GetResource(), a.GetNamespace(), obj))
		case "update":
			obj := a.(k8stesting.UpdateAction).GetObject().DeepCopyObject()
			m, err := meta.Accessor(obj)
			if err != nil {
				return true, nil, err
			}
			cur, err := stored(a.GetResource(), a.GetNamespace(), m.GetName())
			if err != nil {
				return true, nil, err
			}
			if rv := m.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
				return true, nil, conflict(a, m.GetName())
			}
			m.SetResourceVersion(bump())
			return react(k8stesting.NewUpdateAction(a.GetResource(), a.GetNamespace(), obj))
		case "patch":
			pa := a.(k8stesting.PatchAction)
			if pa.GetPatchType() != types.MergePatchType {
				return false, nil, nil
			}
			var p map[string]any
			if err := json.Unmarshal(pa.GetPatch(), &p); err != nil {
				return true, nil, apierrors.NewBadRequest(err.Error())
			}
			cur, err := stored(a.GetResource(), a.GetNamespace(), pa.GetName())
			if err != nil {
				return true, nil, err
			}
			md, _ := p["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
				p["metadata"] = md
			}
			if uid, ok := md["uid"].(string); ok && uid != string(cur.GetUID()) {
				return true, nil, conflict(a, pa.GetName())
			}
			if rv, ok := md["resourceVersion"].(string); ok && rv != cur.GetResourceVersion() {
				return true, nil, conflict(a, pa.GetName())
			}
			md["resourceVersion"] = bump()
			patch, _ := json.Marshal(p)
			return react(k8stesting.NewPatchSubresourceAction(a.GetResource(), a.GetNamespace(), pa.GetName(), types.MergePatchType, patch, a.GetSubresource()))
		}
		return false, nil, nil
	})
}
