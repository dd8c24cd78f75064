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

	// AnnotationRollout on a pod (its template) set to "true" opts it in
	// to rollouts: its sidecar runs the revision that the controller names
	// in [AnnotationRevisions] (see docs/design/fleet.md).
	AnnotationRollout = "hotreload.dev/rollout"
	// AnnotationRestart set to "true" puts a pod in restart mode: its
	// sidecar restarts the app's container for a new revision, and the
	// controller moves such pods to a new revision a few at a time.
	AnnotationRestart = "hotreload.dev/restart"
	// AnnotationRevisions is the annotation through which the controller
	// names, for each source, the revision a pod runs: a JSON object such
	// as {"configmap/app-config":"81234"}.
	AnnotationRevisions = "hotreload.dev/revisions"

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
	rollout := RolloutOptedIn(p)
	if rollout {
		keepForRollouts(p, t)
	} else if HasSidecar(p) {
		// Only its name: the injector's check of missed injections
		// asks whether the pod runs the sidecar.
		t.Spec.Containers = []corev1.Container{{Name: SidecarContainer}}
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
		// A rollout pod keeps whether a volume projects only some items:
		// a rollout refuses such a pod.
		var items []corev1.KeyToPath
		if rollout {
			items = []corev1.KeyToPath{{}}
		}
		switch {
		case v.ConfigMap != nil:
			s.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: v.ConfigMap.LocalObjectReference}
			if len(v.ConfigMap.Items) > 0 {
				s.ConfigMap.Items = items
			}
		case v.Secret != nil:
			s.Secret = &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName}
			if len(v.Secret.Items) > 0 {
				s.Secret.Items = items
			}
		case v.Projected != nil:
			var ps []corev1.VolumeProjection
			for _, src := range v.Projected.Sources {
				switch {
				case src.ConfigMap != nil:
					c := &corev1.ConfigMapProjection{LocalObjectReference: src.ConfigMap.LocalObjectReference}
					if len(src.ConfigMap.Items) > 0 {
						c.Items = items
					}
					ps = append(ps, corev1.VolumeProjection{ConfigMap: c})
				case src.Secret != nil:
					c := &corev1.SecretProjection{LocalObjectReference: src.Secret.LocalObjectReference}
					if len(src.Secret.Items) > 0 {
						c.Items = items
					}
					ps = append(ps, corev1.VolumeProjection{Secret: c})
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

// HasSidecar reports whether a pod runs hotreload: a container or an init
// container (a native sidecar) named [SidecarContainer], injected or
// written by hand.
func HasSidecar(p *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name == SidecarContainer {
				return true
			}
		}
	}
	return false
}

// RolloutOptedIn reports whether a pod takes part in rollouts or restarts
// ([AnnotationRollout] or [AnnotationRestart] set to "true").
func RolloutOptedIn(p *corev1.Pod) bool {
	return p.Annotations[AnnotationRollout] == "true" || p.Annotations[AnnotationRestart] == "true"
}

// keepForRollouts copies into t what a rollout decides from: the pod's
// owner, address, readiness and restarts, its restart policy and process
// namespace, its containers' names, the sidecar's ports and the sources
// of their env vars (names only, never a value).
func keepForRollouts(p, t *corev1.Pod) {
	t.OwnerReferences = p.OwnerReferences
	t.Spec.RestartPolicy = p.Spec.RestartPolicy
	t.Spec.ShareProcessNamespace = p.Spec.ShareProcessNamespace
	t.Status.PodIP = p.Status.PodIP
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			t.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	trimStatuses := func(in []corev1.ContainerStatus) []corev1.ContainerStatus {
		out := make([]corev1.ContainerStatus, 0, len(in))
		for _, cs := range in {
			c := corev1.ContainerStatus{Name: cs.Name, Ready: cs.Ready, RestartCount: cs.RestartCount}
			if cs.State.Running != nil {
				c.State.Running = &corev1.ContainerStateRunning{StartedAt: cs.State.Running.StartedAt}
			}
			out = append(out, c)
		}
		return out
	}
	t.Status.ContainerStatuses = trimStatuses(p.Status.ContainerStatuses)
	t.Status.InitContainerStatuses = trimStatuses(p.Status.InitContainerStatuses)
	trimContainers := func(in []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, 0, len(in))
		for _, c := range in {
			tc := corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
			if c.Name == SidecarContainer {
				for _, port := range c.Ports {
					tc.Ports = append(tc.Ports, corev1.ContainerPort{Name: port.Name, ContainerPort: port.ContainerPort})
				}
			}
			for _, e := range c.EnvFrom {
				switch {
				case e.ConfigMapRef != nil:
					tc.EnvFrom = append(tc.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: e.ConfigMapRef.LocalObjectReference}})
				case e.SecretRef != nil:
					tc.EnvFrom = append(tc.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: e.SecretRef.LocalObjectReference}})
				}
			}
			for _, e := range c.Env {
				switch f := e.ValueFrom; {
				case f == nil:
				case f.ConfigMapKeyRef != nil:
					tc.Env = append(tc.Env, corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: f.ConfigMapKeyRef.LocalObjectReference}}})
				case f.SecretKeyRef != nil:
					tc.Env = append(tc.Env, corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: f.SecretKeyRef.LocalObjectReference}}})
				}
			}
			out = append(out, tc)
		}
		return out
	}
	t.Spec.Containers = trimContainers(p.Spec.Containers)
	t.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
}

// SidecarContainer is the name of hotreload's container in a pod, as the
// examples and the injector name it; a rollout reads its report from the
// port of that container named [SidecarPort].
const (
	SidecarContainer = "hotreload"
	SidecarPort      = "metrics"
)

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
