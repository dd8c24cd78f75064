package rollout

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hotreload/hotreload/controller"
)

// Annotations of restart mode, on the pod template.
const (
	// AnnotationRestartBatch bounds how many pods of a source in restart
	// mode restart at once when no ConfigRollout names the source: a
	// count ("2") or a percent ("25%"); default 1.
	AnnotationRestartBatch = "hotreload.dev/restart-batch"
	// AnnotationSingleReplica set to "true" consents to restarting the
	// app of a workload that has a single pod (which is then down while
	// it restarts).
	AnnotationSingleReplica = "hotreload.dev/restart-single-replica"
)

// Ref is the name of a source in the revisions annotation and in the
// sidecar's report: "configmap/NAME" or "secret/NAME".
func Ref(k controller.ObjectKey) string { return string(k.Kind) + "/" + k.Name }

// StableKey is the key of a source's stable copy.
func StableKey(k controller.ObjectKey) controller.ObjectKey {
	return controller.ObjectKey{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name + StableSuffix}
}

// Revisions reads a pod's revisions annotation; one that does not parse
// is none (the controller writes it anew).
func Revisions(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	if v, ok := p.Annotations[controller.AnnotationRevisions]; ok {
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return map[string]string{}
		}
	}
	return out
}

// use is how a pod uses a source.
type use struct {
	volume, items, stable, env bool
}

func uses(p *corev1.Pod, k controller.ObjectKey) use {
	var u use
	stable := k.Name + StableSuffix
	vol := func(kind controller.Kind, name string, items bool) {
		if kind != k.Kind {
			return
		}
		switch name {
		case k.Name:
			u.volume = true
			u.items = u.items || items
		case stable:
			u.stable = true
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			vol(controller.ConfigMap, v.ConfigMap.Name, len(v.ConfigMap.Items) > 0)
		case v.Secret != nil:
			vol(controller.Secret, v.Secret.SecretName, len(v.Secret.Items) > 0)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					vol(controller.ConfigMap, s.ConfigMap.Name, len(s.ConfigMap.Items) > 0)
				}
				if s.Secret != nil {
					vol(controller.Secret, s.Secret.Name, len(s.Secret.Items) > 0)
				}
			}
		}
	}
	for _, key := range envSources(p) {
		if key.Kind == k.Kind && key.Name == k.Name {
			u.env = true
		}
	}
	return u
}

// envSources lists the ConfigMaps and Secrets the env vars of a pod's
// containers (but hotreload's) come from.
func envSources(p *corev1.Pod) []controller.ObjectKey {
	var out []controller.ObjectKey
	add := func(kind controller.Kind, name string) {
		k := controller.ObjectKey{Kind: kind, Namespace: p.Namespace, Name: name}
		for _, o := range out {
			if o == k {
				return
			}
		}
		if name != "" {
			out = append(out, k)
		}
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == controller.SidecarContainer {
			continue
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add(controller.ConfigMap, e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				add(controller.Secret, e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if f := e.ValueFrom; f != nil && f.ConfigMapKeyRef != nil {
				add(controller.ConfigMap, f.ConfigMapKeyRef.Name)
			}
			if f := e.ValueFrom; f != nil && f.SecretKeyRef != nil {
				add(controller.Secret, f.SecretKeyRef.Name)
			}
		}
	}
	return out
}

// Sources lists the sources a pod that opted in takes part in rollouts of:
// the objects it mounts beside their stable copies (or that it mounts at
// all: a rollout refuses those that lack one), and, in restart mode, the
// sources of its env vars. Stable copies themselves are not sources.
func Sources(p *corev1.Pod) []controller.ObjectKey {
	if !controller.RolloutOptedIn(p) {
		return nil
	}
	var out []controller.ObjectKey
	for _, k := range controller.Mounts(p) {
		if !strings.HasSuffix(k.Name, StableSuffix) {
			out = append(out, k)
		}
	}
	if restartMode(p) {
	next:
		for _, k := range envSources(p) {
			for _, o := range out {
				if o == k {
					continue next
				}
			}
			out = append(out, k)
		}
	}
	return out
}

func restartMode(p *corev1.Pod) bool { return p.Annotations[controller.AnnotationRestart] == "true" }

// member is a pod that uses a source, with what the controller needs
// besides what Decide sees.
type member struct {
	Member
	pod      *corev1.Pod
	restart  bool // restart mode
	restarts int  // the sum of its containers' restart counts
	// managed: the source's rollout decides what this pod runs (a pod in
	// rollout mode without the stable copy is not, and is refused).
	managed bool
}

// classify says whether and how p takes part in the rollout of source k.
// owners counts, by controller uid, the opted-in pods of the namespace;
// a pod with no controller is a workload of its own.
func classify(p *corev1.Pod, k controller.ObjectKey, owners map[types.UID]int) (member, bool) {
	if p.Namespace != k.Namespace || !controller.RolloutOptedIn(p) || p.DeletionTimestamp != nil {
		return member{}, false
	}
	u := uses(p, k)
	m := member{pod: p, restart: restartMode(p), managed: true}
	if !u.volume && !(u.env && m.restart) {
		return member{}, false
	}
	m.Name = p.Name
	m.Want = Revisions(p)[Ref(k)]
	m.Running = p.Status.Phase == corev1.PodRunning
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			m.Ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		m.restarts += int(cs.RestartCount)
	}
	m.Env = m.restart && u.env && !u.volume
	stable := k.Name + StableSuffix
	switch {
	case u.volume && u.items:
		m.Refused = fmt.Sprintf("its volume projects only some keys of %s (items): a rollout needs the whole object", Ref(k))
		m.managed = false
	case u.volume && !u.stable:
		m.Refused = fmt.Sprintf("it mounts %s but not its stable copy %s: its sidecar would run every edit at once", Ref(k), stable)
		m.managed = false
	case !m.restart:
	case p.Spec.RestartPolicy == corev1.RestartPolicyNever || p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure:
		m.Refused = fmt.Sprintf("restart mode and restartPolicy %s: the kubelet would not start an app that exits when told to restart", p.Spec.RestartPolicy)
	case p.Spec.ShareProcessNamespace == nil || !*p.Spec.ShareProcessNamespace:
		m.Refused = "restart mode without shareProcessNamespace: true: its sidecar cannot find the app's process"
	case owners[ownerUID(p)] <= 1 && p.Annotations[AnnotationSingleReplica] != "true":
		m.Refused = fmt.Sprintf("restart mode in a workload of a single pod: the app would be down while it restarts; set %s: \"true\" on the pod template to allow it", AnnotationSingleReplica)
	}
	return m, true
}

// ownerUID is the uid of the pod's controller (its ReplicaSet,
// StatefulSet, ...), or the pod's own for a bare pod.
func ownerUID(p *corev1.Pod) types.UID {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.UID
		}
	}
	return p.UID
}

// restartBatch is the batch of a restart policy for these pods: the least
// that any of them asks for, 1 by default.
func restartBatch(ms []member, total int) (int, string) {
	batch, bad := 0, ""
	for _, m := range ms {
		v, ok := m.pod.Annotations[AnnotationRestartBatch]
		if !ok || !m.restart {
			continue
		}
		st, err := ParseStep(v)
		if err != nil {
			bad = fmt.Sprintf("pod %s: %s: %v; restarting 1 pod at a time", m.Name, AnnotationRestartBatch, err)
			continue
		}
		if n := st.Pods(total); batch == 0 || n < batch {
			batch = n
		}
	}
	if bad != "" {
		return 1, bad
	}
	return max(batch, 1), ""
}
