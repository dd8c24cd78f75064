package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

const (
	// AnnotationNudge on a pod (set it on the pod template) opts the pod in
	// when its value is "true".
	AnnotationNudge = "hotreload.dev/nudge"
	// AnnotationNudged is the annotation the controller patches, to a value
	// such as "configmap/app-config@81234" or "secret/tls@81240".
	AnnotationNudged = "hotreload.dev/nudged"

	annotationPrefix = "hotreload.dev/"
	mountsIndex      = "mounts"
)

// Kind is the kind of object a pod mounts, as it appears in
// [AnnotationNudged]: "configmap" or "secret".
type Kind string

// The kinds of objects the controller watches.
const (
	ConfigMap Kind = "configmap"
	Secret    Kind = "secret"
)

// ObjectKey names a ConfigMap or Secret.
type ObjectKey struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (k ObjectKey) String() string { return k.Namespace + "/" + string(k.Kind) + "/" + k.Name }

// Nudge is the value of [AnnotationNudged] for version rv of the object
// named by k.
func (k ObjectKey) Nudge(rv string) string { return string(k.Kind) + "/" + k.Name + "@" + rv }

// ParseNudge splits a value of [AnnotationNudged] into its kind, name and
// resourceVersion.
func ParseNudge(v string) (kind Kind, name, rv string, err error) {
	k, rest, ok := strings.Cut(v, "/")
	at := strings.LastIndexByte(rest, '@')
	if !ok || at <= 0 || at == len(rest)-1 || (Kind(k) != ConfigMap && Kind(k) != Secret) {
		return "", "", "", fmt.Errorf("%s %q: want configmap/<name>@<resourceVersion> or secret/<name>@<resourceVersion>", AnnotationNudged, v)
	}
	return Kind(k), rest[:at], rest[at+1:], nil
}

// TrimPod is the transform of the pod informer: it keeps only what the
// controller needs (name, namespace, uid, resourceVersion, the hotreload.dev/
// annotations, the deletion timestamp, the phase, and the names of the
// ConfigMaps and Secrets the volumes mount) so that a cluster's pods cost
// little memory. Other values are passed through.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, annotationPrefix) {
			if t.Annotations == nil {
				t.Annotations = map[string]string{}
			}
			t.Annotations[k] = v
		}
	}
	for _, v := range p.Spec.Volumes {
		var s corev1.VolumeSource
		switch {
		case v.ConfigMap != nil:
			s.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: v.ConfigMap.LocalObjectReference}
		case v.Secret != nil:
			s.Secret = &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName}
		case v.Projected != nil:
			var ps []corev1.VolumeProjection
			for _, src := range v.Projected.Sources {
				switch {
				case src.ConfigMap != nil:
					ps = append(ps, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: src.ConfigMap.LocalObjectReference}})
				case src.Secret != nil:
					ps = append(ps, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: src.Secret.LocalObjectReference}})
				}
			}
			if ps == nil {
				continue
			}
			s.Projected = &corev1.ProjectedVolumeSource{Sources: ps}
		default:
			continue
		}
		t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{VolumeSource: s})
	}
	return t, nil
}

// TrimObject is the transform of the ConfigMap and Secret metadata
// informers: it keeps name, namespace, uid and resourceVersion, and drops
// labels and annotations, which for a Secret applied with kubectl hold its
// data (kubectl.kubernetes.io/last-applied-configuration).
func TrimObject(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			Namespace:       m.Namespace,
			UID:             m.UID,
			ResourceVersion: m.ResourceVersion,
		},
	}, nil
}

// Mounts lists the ConfigMaps and Secrets that a pod's volumes mount,
// directly or as sources of a projected volume, each once.
func Mounts(p *corev1.Pod) []ObjectKey {
	var keys []ObjectKey
	add := func(kind Kind, name string) {
		if name == "" {
			return
		}
		k := ObjectKey{kind, p.Namespace, name}
		for _, o := range keys {
			if o == k {
				return
			}
		}
		keys = append(keys, k)
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add(ConfigMap, v.ConfigMap.Name)
		case v.Secret != nil:
			add(Secret, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(ConfigMap, s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add(Secret, s.Secret.Name)
				}
			}
		}
	}
	return keys
}

func indexMounts(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	keys := Mounts(p)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out, nil
}

var _ cache.IndexFunc = indexMounts

// OptedIn reports whether the pod asks to be nudged.
func OptedIn(p *corev1.Pod) bool { return p.Annotations[AnnotationNudge] == "true" }

// nudgeable reports whether a patch now would make the kubelet rewrite the
// pod's volumes for a running app: opted in, running, not being deleted.
func nudgeable(p *corev1.Pod) bool {
	return OptedIn(p) && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
}
