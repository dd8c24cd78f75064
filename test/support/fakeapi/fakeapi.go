// Package fakeapi is test support: it makes client-go's fake clients keep
// resourceVersions as the API server does, so that tests of writes with
// preconditions (two replicas that both lead) can fail.
package fakeapi

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// Fake is what client-go's fakes share: the typed clientset and the
// dynamic client.
type Fake interface {
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
	Tracker() k8stesting.ObjectTracker
}

// Concurrency makes a fake client check resourceVersions as the API
// server does: every write gives the object a new resourceVersion; an
// update, or a merge patch that names a resourceVersion (or a uid), whose
// version is not the stored one fails with 409 Conflict. The fake on its
// own keeps the version an object was created with and applies every
// write. Versions count up from 1001, shared by every object of f.
func Concurrency(f Fake) {
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
