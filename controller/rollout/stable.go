package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/internal/revision"
)

// LabelStableOf is on every stable copy: the name of its source.
const LabelStableOf = "hotreload.dev/stable-of"

// content is a ConfigMap's or Secret's content as read for one sync: the
// controller holds it no longer than the sync, and keeps only its sum.
type content struct {
	key      controller.ObjectKey
	uid      types.UID
	rv       string
	labels   map[string]string
	owners   []metav1.OwnerReference
	data     map[string]string // a ConfigMap's
	binary   map[string][]byte // a ConfigMap's binaryData, a Secret's data
	reserved []byte            // the reserved key, nil if none
	has      bool              // the reserved key is there
}

func (c *content) sum() [32]byte {
	if c.key.Kind == controller.Secret {
		return revision.SecretSum(c.binary)
	}
	return revision.ConfigMapSum(c.data, c.binary)
}

// errNotFound wraps the error of a source or stable copy that does not
// exist.
var errNotFound = errors.New("not found")

func (ctl *Controller) read(ctx context.Context, k controller.ObjectKey) (*content, error) {
	c := &content{key: k}
	if k.Kind == controller.Secret {
		s, err := ctl.opts.Core.Secrets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			return nil, wrapNotFound(fmt.Errorf("get secret %s/%s: %w", k.Namespace, k.Name, err))
		}
		c.uid, c.rv, c.labels, c.owners, c.binary = s.UID, s.ResourceVersion, s.Labels, s.OwnerReferences, s.Data
		c.reserved, c.has = s.Data[revision.ReservedKey]
		return c, nil
	}
	cm, err := ctl.opts.Core.ConfigMaps(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if err != nil {
		return nil, wrapNotFound(fmt.Errorf("get configmap %s/%s: %w", k.Namespace, k.Name, err))
	}
	c.uid, c.rv, c.labels, c.owners, c.data, c.binary = cm.UID, cm.ResourceVersion, cm.Labels, cm.OwnerReferences, cm.Data, cm.BinaryData
	if v, ok := cm.Data[revision.ReservedKey]; ok {
		c.reserved, c.has = []byte(v), true
	}
	return c, nil
}

func wrapNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", errNotFound, err)
	}
	return err
}

// writeStable creates (old == nil) or updates (with old's resourceVersion
// as the precondition) src's stable copy: src's content when src is not
// nil, else old's, and the reserved key r. It returns the new
// resourceVersion.
func (ctl *Controller) writeStable(ctx context.Context, sk controller.ObjectKey, src, old *content, r Reserved) (string, error) {
	from := src
	if from == nil {
		from = old
	}
	meta := metav1.ObjectMeta{Name: sk.Name, Namespace: sk.Namespace, Labels: map[string]string{LabelStableOf: r.sourceName()}}
	if src != nil {
		t := true
		meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: kindName(src.key.Kind), Name: src.key.Name, UID: src.uid, Controller: &t}}
	}
	if old != nil {
		meta.ResourceVersion = old.rv
		if src == nil {
			meta.OwnerReferences = old.owners
		}
	}
	var (
		rv  string
		err error
	)
	if sk.Kind == controller.Secret {
		data := maps.Clone(from.binary)
		if data == nil {
			data = map[string][]byte{}
		}
		data[revision.ReservedKey] = r.Marshal()
		s := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: data}
		var out *corev1.Secret
		if old == nil {
			out, err = ctl.opts.Core.Secrets(sk.Namespace).Create(ctx, s, metav1.CreateOptions{})
		} else {
			out, err = ctl.opts.Core.Secrets(sk.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		}
		if out != nil {
			rv = out.ResourceVersion
		}
	} else {
		data := maps.Clone(from.data)
		if data == nil {
			data = map[string]string{}
		}
		data[revision.ReservedKey] = string(r.Marshal())
		cm := &corev1.ConfigMap{ObjectMeta: meta, Data: data, BinaryData: maps.Clone(from.binary)}
		var out *corev1.ConfigMap
		if old == nil {
			out, err = ctl.opts.Core.ConfigMaps(sk.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		} else {
			out, err = ctl.opts.Core.ConfigMaps(sk.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if out != nil {
			rv = out.ResourceVersion
		}
	}
	verb := "update"
	if old == nil {
		verb = "create"
	}
	switch {
	case err == nil:
		return rv, nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return "", fmt.Errorf("%w: %s %s %s/%s: %w", controller.ErrLost, verb, sk.Kind, sk.Namespace, sk.Name, err)
	case apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsInvalid(err):
		return "", fmt.Errorf("%w: %s %s %s/%s: %w", errTooBig, verb, sk.Kind, sk.Namespace, sk.Name, err)
	}
	return "", fmt.Errorf("%s %s %s/%s: %w", verb, sk.Kind, sk.Namespace, sk.Name, err)
}

// errTooBig marks a stable copy that the API server refused as too big
// or invalid: the source with the reserved key does not fit.
var errTooBig = errors.New("the source does not fit in its stable copy with the reserved key")

// deleteStable deletes a stable copy whose uid is uid.
func (ctl *Controller) deleteStable(ctx context.Context, sk controller.ObjectKey, uid types.UID) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	var err error
	if sk.Kind == controller.Secret {
		err = ctl.opts.Core.Secrets(sk.Namespace).Delete(ctx, sk.Name, opts)
	} else {
		err = ctl.opts.Core.ConfigMaps(sk.Namespace).Delete(ctx, sk.Name, opts)
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s %s/%s: %w", sk.Kind, sk.Namespace, sk.Name, err)
	}
	return nil
}

func kindName(k controller.Kind) string {
	if k == controller.Secret {
		return "Secret"
	}
	return "ConfigMap"
}

func (r Reserved) sourceName() string {
	_, name, _ := cutRef(r.Source)
	return name
}

func cutRef(ref string) (string, string, bool) {
	for i := range len(ref) {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:], true
		}
	}
	return "", ref, false
}
