// Package controller turns "this ConfigMap or Secret changed" into "annotate
// the pods that mount it", so that the kubelet syncs those pods at once and
// rewrites their volumes within about a tenth of a second, instead of at its
// next periodic sync (a minute or more by default). The hotreload sidecar in
// each pod then sees the new content and reloads the app in place.
//
// # Opting in
//
// A pod opts in with the annotation [AnnotationNudge] set to "true" on its
// template. The controller patches the annotation [AnnotationNudged] of such
// a pod with a JSON merge patch whose value names the object and the version
// that caused the nudge, such as "configmap/app-config@81234". The patch
// changes nothing else: the kubelet reacts to any update of the pod object
// by syncing it, and the sidecar decides by content whether the app reloads.
//
// # What is watched
//
// ConfigMaps and Secrets are watched by metadata only (PartialObjectMetadata),
// and trimmed further to name, namespace, uid and resourceVersion: the
// controller never holds Secret data, nor an annotation such as
// kubectl's last-applied-configuration that may repeat it. Pods are trimmed
// by [TrimPod] to what the decision needs. An index maps (namespace, kind,
// name) to the pods that mount the object through a configMap, secret or
// projected volume.
//
// A metadata informer cannot tell a data change from a label change: every
// new resourceVersion nudges. A nudge that the kubelet turns into no file
// change costs one pod update and reloads nothing.
//
// With [Options].ConfigMapsOnly the Secrets are not watched at all, and the
// controller needs no access to them.
//
// # One pod at a time, and bursts
//
// The work queue holds pods, in the shape of sample-controller: a change of
// an object queues the pods that mount it, and one sync function brings one
// pod up to date, with one patch per kind of object it is behind on (the
// newest of that kind: the kubelet reads every object of the pod when it
// syncs it). A pod nudged less than [Options].Coalesce ago waits until the
// changes settle, so that a burst of edits makes a few nudges, not one per
// edit; a single edit is never delayed (see due).
//
// # Versions and failover
//
// For every pod the controller keeps, per resource (configmaps, secrets), a
// mark: the highest resourceVersion of that resource that the pod's volumes
// are known to hold. A nudge for version v of a ConfigMap raises the pod's
// ConfigMap mark to v (the kubelet reads every object when it syncs the pod,
// so every ConfigMap at or below v is current). Marks come from the
// controller's own patches, from the [AnnotationNudged] values it sees on
// pods (so a standby replica learns what the leader did), and, for a pod
// first seen without any, from the objects' versions at that moment: a pod
// is current when it starts.
//
// The leader nudges a pod only for an object newer than the pod's mark. On
// becoming leader it compares every object with the marks of the pods that
// mount it and nudges those behind, so an edit made during a failover is not
// lost, and a start does not patch pods that are current. resourceVersions
// are compared as the integers the API server's storage gives them, only
// between objects of the same resource.
//
// Two replicas may both act as leader for a short while (a frozen leader
// that resumes); write.go says why a nudge is safe under it and how a
// decision that is not idempotent must be written ([PatchPodAnnotations]).
//
// # Failing calls
//
// The controller speaks for the API calls that fail (the informers' lists
// and watches, the patches, the Lease): one warning per kind of call with
// the error, then at most one per [Options].WarnInterval while it keeps
// failing, and a line when it works again; client-go's own lines about them
// are at debug level.
package controller
