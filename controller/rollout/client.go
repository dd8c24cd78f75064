package rollout

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/hotreload/hotreload/controller"
)

// AnnotationAction on a ConfigRollout asks for one action: "promote" or
// "abort". The controller acts once, records it in status.lastAction, and
// removes the annotation.
const AnnotationAction = "hotreload.dev/action"

// Client reads and writes ConfigRollouts through client-go's dynamic
// client, converting to and from the handwritten types of this package.
// Chosen over a generated clientset: no code generator (they are not on
// the Go module proxy as tools this repository may run), no scheme to
// register, and client-go's dynamic fake runs it in the tests with the
// same resourceVersion checks as every other object.
type Client struct {
	res dynamic.NamespaceableResourceInterface
}

// NewClient returns a Client on d.
func NewClient(d dynamic.Interface) *Client { return &Client{res: d.Resource(GVR)} }

// FromUnstructured converts what the dynamic client returns.
func FromUnstructured(u *unstructured.Unstructured) (*ConfigRollout, error) {
	var r ConfigRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("configrollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &r, nil
}

func toUnstructured(r *ConfigRollout) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(Group + "/" + Version)
	u.SetKind(Kind)
	return u, nil
}

// List lists the ConfigRollouts of ns ("" for all).
func (c *Client) List(ctx context.Context, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return c.res.Namespace(ns).List(ctx, opts)
}

// Watch watches the ConfigRollouts of ns ("" for all).
func (c *Client) Watch(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.res.Namespace(ns).Watch(ctx, opts)
}

// Get reads one ConfigRollout.
func (c *Client) Get(ctx context.Context, ns, name string) (*ConfigRollout, error) {
	u, err := c.res.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// Create creates a ConfigRollout (for tests and tools).
func (c *Client) Create(ctx context.Context, r *ConfigRollout) (*ConfigRollout, error) {
	u, err := toUnstructured(r)
	if err != nil {
		return nil, err
	}
	u, err = c.res.Namespace(r.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// UpdateStatus writes r's status with r's resourceVersion as the
// precondition: an error for which controller.Lost holds means another
// writer was first.
func (c *Client) UpdateStatus(ctx context.Context, r *ConfigRollout) (*ConfigRollout, error) {
	if r.ResourceVersion == "" {
		return nil, fmt.Errorf("configrollout %s/%s: no resourceVersion: a status write needs one as its precondition", r.Namespace, r.Name)
	}
	u, err := toUnstructured(r)
	if err != nil {
		return nil, err
	}
	u, err = c.res.Namespace(r.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("%w: %w", controller.ErrLost, err)
	}
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// RemoveAction removes the action annotation from r as read (its uid and
// resourceVersion are the precondition).
func (c *Client) RemoveAction(ctx context.Context, r *ConfigRollout) error {
	var p struct {
		Metadata struct {
			UID             types.UID          `json:"uid"`
			ResourceVersion string             `json:"resourceVersion"`
			Annotations     map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	p.Metadata.UID, p.Metadata.ResourceVersion = r.UID, r.ResourceVersion
	p.Metadata.Annotations = map[string]*string{AnnotationAction: nil}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = c.res.Namespace(r.Namespace).Patch(ctx, r.Name, types.MergePatchType, b, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %w", controller.ErrLost, err)
	}
	return err
}
