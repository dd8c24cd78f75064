package rollout

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The ConfigRollout API: group, version and resource, as
// examples/controller/crd.yaml declares them.
const (
	Group    = "hotreload.dev"
	Version  = "v1alpha1"
	Kind     = "ConfigRollout"
	Resource = "configrollouts"
)

// GVR is the ConfigRollout resource.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// Phases of a rollout, as status.phase holds them.
const (
	// PhaseHealthy: every pod runs the stable revision, which is the
	// source's content; no rollout runs.
	PhaseHealthy = "Healthy"
	// PhaseProgressing: a candidate revision is being rolled out.
	PhaseProgressing = "Progressing"
	// PhasePaused: a rollout runs but spec.paused holds it where it is.
	PhasePaused = "Paused"
	// PhaseAborted: the candidate was rolled back; the phase stays until
	// the source's content changes again.
	PhaseAborted = "Aborted"
	// PhaseFailed: the policy or the source cannot be rolled out (see
	// status.message); nothing was changed.
	PhaseFailed = "Failed"
)

// Phases lists every phase, for the metrics.
var Phases = []string{PhaseHealthy, PhaseProgressing, PhasePaused, PhaseAborted, PhaseFailed}

// ConfigRollout is a policy for rolling out the edits of one ConfigMap or
// Secret to the pods that use it: steps, a bake time, what aborts. See
// docs/design/fleet.md.
type ConfigRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec   `json:"spec"`
	Status Status `json:"status,omitempty"`
}

// Spec is the policy.
type Spec struct {
	Source SourceRef `json:"source"`
	// Steps are the shares of the pods that run the candidate, in order:
	// a percent ("10%") or a count ("3"). The last is "100%".
	Steps []string `json:"steps"`
	// BakeTime is how long every updated pod must stay healthy after a
	// step has been applied before the next step starts. Default 0s.
	BakeTime string `json:"bakeTime,omitempty"`
	// ProgressDeadline is how long a step may take until every pod it
	// updated reports the candidate applied; past it, the rollout aborts.
	// Default 5m.
	ProgressDeadline string `json:"progressDeadline,omitempty"`
	// Analysis, if set, is a Prometheus query whose value must stay
	// within bounds during the rollout.
	Analysis *Analysis `json:"analysis,omitempty"`
	// Paused holds the rollout where it is: no pod is moved and no step
	// starts until it is false again. Health checks still abort.
	Paused bool `json:"paused,omitempty"`
}

// SourceRef names the ConfigMap or Secret, in the ConfigRollout's
// namespace.
type SourceRef struct {
	Kind string `json:"kind"` // ConfigMap or Secret
	Name string `json:"name"`
}

// Analysis is what a rollout watches besides the pods.
type Analysis struct {
	Prometheus *PrometheusAnalysis `json:"prometheus,omitempty"`
}

// PrometheusAnalysis is an instant query whose single value must stay
// within Min and Max (either may be left out).
type PrometheusAnalysis struct {
	Address string   `json:"address"`
	Query   string   `json:"query"`
	Max     *float64 `json:"max,omitempty"`
	Min     *float64 `json:"min,omitempty"`
	// Interval is how often the query runs during a rollout; default 10s.
	Interval string `json:"interval,omitempty"`
}

// Status is what the controller reports, written with the object's
// resourceVersion as a precondition.
type Status struct {
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	Phase              string `json:"phase,omitempty"`
	// Revision is the candidate: the source's resourceVersion when its
	// content was captured. Kept after a promotion or an abort.
	Revision string `json:"revision,omitempty"`
	// StableRevision is the revision the stable copy holds.
	StableRevision string `json:"stableRevision,omitempty"`
	Step           int    `json:"step"`  // 1-based; 0 when no rollout runs
	Steps          int    `json:"steps"` // len(spec.steps)
	Updated        int    `json:"updated"`
	Healthy        int    `json:"healthy"`
	Total          int    `json:"total"`
	Message        string `json:"message,omitempty"`

	// StartedAt is when the rollout of Revision started.
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// StepStartedAt is when the current step started: its progress
	// deadline counts from there.
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`
	// BakeStartedAt is when every pod of the current step had reported
	// the candidate applied; nil until then.
	BakeStartedAt *metav1.Time `json:"bakeStartedAt,omitempty"`
	// LastAction is the last hotreload.dev/action handled, as
	// "<action> <revision>".
	LastAction string `json:"lastAction,omitempty"`

	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// List is a list of ConfigRollouts.
type List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigRollout `json:"items"`
}

var _ runtime.Object = (*ConfigRollout)(nil)

// DeepCopyObject implements runtime.Object.
func (r *ConfigRollout) DeepCopyObject() runtime.Object { return r.DeepCopy() }

// DeepCopy copies r, sharing nothing with it.
func (r *ConfigRollout) DeepCopy() *ConfigRollout {
	if r == nil {
		return nil
	}
	out := &ConfigRollout{TypeMeta: r.TypeMeta, Spec: r.Spec, Status: r.Status}
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Steps = append([]string(nil), r.Spec.Steps...)
	if a := r.Spec.Analysis; a != nil {
		ca := *a
		if p := a.Prometheus; p != nil {
			cp := *p
			if p.Max != nil {
				v := *p.Max
				cp.Max = &v
			}
			if p.Min != nil {
				v := *p.Min
				cp.Min = &v
			}
			ca.Prometheus = &cp
		}
		out.Spec.Analysis = &ca
	}
	for _, t := range []**metav1.Time{&out.Status.StartedAt, &out.Status.StepStartedAt, &out.Status.BakeStartedAt} {
		if *t != nil {
			*t = (*t).DeepCopy()
		}
	}
	if r.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(r.Status.Conditions))
		for i := range r.Status.Conditions {
			r.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	return out
}
