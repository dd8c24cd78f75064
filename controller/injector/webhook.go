package injector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// The results of a review, the values of the label result of
// hotreload_controller_injections_total.
const (
	ResultInjected = "injected" // the sidecar was added
	ResultPresent  = "present"  // the pod had it already
	ResultInvalid  = "invalid"  // an annotation or the pod did not suit: admitted unchanged
	ResultExcluded = "excluded" // a namespace the injector never injects into
	ResultError    = "error"    // the injector failed: admitted unchanged
)

// Event reasons on pods and their owners.
const (
	ReasonNotInjected = "HotreloadNotInjected" // an opted-in pod admitted without the sidecar, and why
	ReasonMissing     = "HotreloadSidecarMissing"
)

// maxReview bounds the size of an AdmissionReview read: a pod is at most
// about 1.5 MB, and the API server sends it once (no old object on create).
const maxReview = 8 << 20

// webhook answers the API server's AdmissionReviews for pods.
type webhook struct {
	logger   log.Logger
	opts     Sidecar // Native and ContentKeySecret are set per review
	native   func() bool
	keys     *contentKeys
	excluded []string // namespaces
	events   record.EventRecorder
	m        *metrics
	warnings *limiter // of log lines about pods' annotations
	now      func() time.Time
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(rw, "want POST of an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview+1))
	if err != nil || len(body) > maxReview {
		http.Error(rw, "cannot read the AdmissionReview", http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(rw, "want an AdmissionReview of admission.k8s.io/v1 with a request", http.StatusBadRequest)
		return
	}
	resp := w.review(r.Context(), review.Request)
	resp.UID = review.Request.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(out)
}

// review admits every pod, with the sidecar where it opted in and suits.
func (w *webhook) review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	start := w.now()
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create || req.SubResource != "" {
		return allow
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		w.result(ResultError, start)
		level.Error(w.logger).Log("msg", "pod of an admission request does not decode, admitted unchanged", "namespace", req.Namespace, "err", err)
		return allow
	}
	if !hasPrefixed(pod.Annotations) {
		return allow
	}
	dryRun := req.DryRun != nil && *req.DryRun
	name := podName(&pod, req)
	if slices.Contains(w.excluded, req.Namespace) {
		if OptedIn(pod.Annotations) {
			w.result(ResultExcluded, start)
			allow.Warnings = []string{fmt.Sprintf("hotreload: the injector never adds its sidecar in namespace %s", req.Namespace)}
		}
		return allow
	}
	r, warnings, err := ParseAnnotations(pod.Annotations)
	allow.Warnings = prefixed(warnings)
	switch {
	case errors.Is(err, errNotOptedIn) || (err == nil && !OptedIn(pod.Annotations)):
		return allow
	case HasSidecar(&pod.Spec):
		w.result(ResultPresent, start)
		if pod.Annotations[AnnotationInjected] != ResultPresent {
			w.patch(allow, []Op{{"add", "/metadata/annotations/" + escapePointer(AnnotationInjected), ResultPresent}})
		}
		return allow
	case err != nil:
		w.notInjected(allow, &pod, req, name, err, dryRun, start)
		return allow
	}

	o := w.opts
	o.Native = w.native()
	// First without the content key: a pod that does not suit makes no
	// Secret in its namespace.
	res, err := Mutate(&pod, r, o)
	if err != nil {
		w.notInjected(allow, &pod, req, name, err, dryRun, start)
		return allow
	}
	key, kerr := w.keys.secret(ctx, req.Namespace, dryRun)
	if kerr != nil && w.warnings.allow("content key "+req.Namespace, w.now()) {
		level.Warn(w.logger).Log("msg", "content key Secret unavailable, injecting without it: Secret volumes show no content value", "namespace", req.Namespace, "err", kerr)
	}
	if key != "" {
		o.ContentKeySecret = key
		if res, err = Mutate(&pod, r, o); err != nil {
			// The key adds a volume and a flag, nothing that can fail.
			w.result(ResultError, start)
			level.Error(w.logger).Log("msg", "pod admitted without the sidecar", "namespace", req.Namespace, "pod", name, "err", err)
			return allow
		}
	}
	w.patch(allow, res.Patch)
	allow.Warnings = append(allow.Warnings, prefixed(res.Warnings)...)
	w.result(ResultInjected, start)
	level.Debug(w.logger).Log("msg", "injected", "namespace", req.Namespace, "pod", name, "mode", res.Mode, "volumes", strings.Join(res.Watched, ","), "warnings", len(res.Warnings), "dry_run", dryRun)
	return allow
}

// notInjected admits the pod unchanged, and says why: a warning per
// problem to the client, an Event on the pod's owner (or the pod, if it has
// a name already), a log line.
func (w *webhook) notInjected(resp *admissionv1.AdmissionResponse, pod *corev1.Pod, req *admissionv1.AdmissionRequest, name string, err error, dryRun bool, start time.Time) {
	w.result(ResultInvalid, start)
	problems := strings.Split(err.Error(), "\n")
	resp.Warnings = append(resp.Warnings, prefixed(problems)...)
	if dryRun {
		return
	}
	msg := "pod " + name + " admitted without the hotreload sidecar: " + strings.Join(problems, "; ")
	if ref := eventTarget(pod, req.Namespace); ref != nil && w.events != nil {
		w.events.Event(ref, corev1.EventTypeWarning, ReasonNotInjected, truncate(msg, 1024))
	}
	if w.warnings.allow("annotations "+req.Namespace+"/"+ownerName(pod, name), w.now()) {
		level.Warn(w.logger).Log("msg", "pod admitted without the sidecar", "namespace", req.Namespace, "pod", name, "err", strings.Join(problems, "; "))
	}
}

func (w *webhook) patch(resp *admissionv1.AdmissionResponse, ops []Op) {
	b, err := json.Marshal(ops)
	if err != nil {
		// Only values of the API types go in: cannot happen.
		panic(err)
	}
	resp.Patch = b
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
}

func (w *webhook) result(r string, start time.Time) {
	w.m.injections.WithLabelValues(r).Inc()
	w.m.reviewDuration.Observe(w.now().Sub(start).Seconds())
}

// hasPrefixed reports whether a pod carries any hotreload.dev/ annotation:
// only those are looked at (the webhook configuration's match condition
// sends the API server's other pods nowhere).
func hasPrefixed(a map[string]string) bool {
	for k := range a {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// maxWarning is the length of a warning that the API server passes on
// whole; longer ones may be truncated.
const maxWarning = 256

func prefixed(msgs []string) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, truncate("hotreload: "+m, maxWarning))
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// podName names a pod in messages: its name, or its generateName with a
// star while the API server has not named it yet.
func podName(p *corev1.Pod, req *admissionv1.AdmissionRequest) string {
	switch {
	case p.Name != "":
		return p.Name
	case req.Name != "":
		return req.Name
	case p.GenerateName != "":
		return p.GenerateName + "*"
	}
	return "(unnamed)"
}

func ownerName(p *corev1.Pod, name string) string {
	if o := metav1.GetControllerOf(p); o != nil {
		return o.Kind + "/" + o.Name
	}
	return name
}

// eventTarget is where an Event about a pod being admitted goes: its
// controller (a ReplicaSet, a StatefulSet...), since a pod of a workload
// has no name yet when it is admitted; else the pod, if it has a name.
func eventTarget(p *corev1.Pod, ns string) *corev1.ObjectReference {
	if o := metav1.GetControllerOf(p); o != nil {
		return &corev1.ObjectReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, Namespace: ns}
	}
	if p.Name != "" {
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, Namespace: ns}
	}
	return nil
}
