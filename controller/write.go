package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Writes under two leaders
//
// Leader election does not make one replica the only one that acts. A
// leader that freezes (a stopped VM, a long GC pause, a partitioned node)
// and resumes after another replica took the Lease acts as leader until it
// reads the Lease again: up to --leader-elect.retry-period with leaseLock,
// up to --leader-elect.renew-deadline with client-go alone. Each write
// must therefore be safe when two replicas make it, one from a stale view.
//
// A nudge is: it names a version of an object and changes nothing else, the
// kubelet answers any update of the pod by reading the current objects, and
// the sidecar reloads only for content it has not loaded. Two nudges of the
// same version are one; a stale replica's nudge of an older version makes
// the kubelet sync the pod once more and deliver what is current, and no
// replica's mark ever moves down. So a nudge carries only the pod's uid (a
// pod replaced under the same name is not nudged by mistake), not its
// resourceVersion: the kubelet updates pods' status often, and a
// precondition on it would fail nudges for nothing.
//
// A decision that is not idempotent (promote or abort a rollout, move a pod
// to another revision) is written with optimistic concurrency: the write
// carries the resourceVersion of the object the decision was made from, and
// the API server applies it only if nobody has written the object since;
// otherwise it answers 409 Conflict. Of two replicas that decided from the
// same state, one write lands and the other fails. The one that fails has
// lost: it drops its decision and decides again from the object as it now is
// (requeue the key; the informer brings the new version), and never resends
// the same decision with a fresh resourceVersion — retry.RetryOnConflict
// around a write decided beforehand would let both replicas win. An Update
// carries the resourceVersion of the object it was given: leave it as read
// (an empty one makes the Update unconditional). A patch carries it only if
// written into the patch, as PodAnnotationPatch does.

// ErrLost is wrapped by the error of a write that lost to another writer
// since the object was read; see Lost.
var ErrLost = errors.New("the object changed since it was read: read it again and decide again")

// Lost reports whether err means that a write with a precondition lost: the
// object changed (or was replaced) since it was read. Decide again from a
// fresh read; do not resend the write.
func Lost(err error) bool { return errors.Is(err, ErrLost) || apierrors.IsConflict(err) }

// PodAnnotationPatch is a JSON merge patch that sets annotations of the pod
// as it was read (a nil value removes the annotation), applied by the API
// server only if the pod still has the uid and resourceVersion it was read
// with.
func PodAnnotationPatch(read *corev1.Pod, annotations map[string]*string) ([]byte, error) {
	if read.UID == "" || read.ResourceVersion == "" {
		return nil, errors.New("pod annotation patch: the pod as read has no uid or resourceVersion")
	}
	var p struct {
		Metadata struct {
			UID             types.UID          `json:"uid"`
			ResourceVersion string             `json:"resourceVersion"`
			Annotations     map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	p.Metadata.UID = read.UID
	p.Metadata.ResourceVersion = read.ResourceVersion
	p.Metadata.Annotations = annotations
	return json.Marshal(p)
}

// PatchPodAnnotations applies PodAnnotationPatch: it sets annotations of
// the pod as read, and returns the pod as written. An error for which Lost
// holds means another writer was first.
func PatchPodAnnotations(ctx context.Context, pods corev1client.PodsGetter, read *corev1.Pod, annotations map[string]*string) (*corev1.Pod, error) {
	data, err := PodAnnotationPatch(read, annotations)
	if err != nil {
		return nil, err
	}
	p, err := pods.Pods(read.Namespace).Patch(ctx, read.Name, types.MergePatchType, data, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("%w: %w", ErrLost, err)
	}
	return p, err
}
