package rollout

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The metrics of rollouts, exported by the leader only (a standby's are
// empty). rollout is the ConfigRollout's name, or "restart:<ref>" for the
// staggered restarts of a source that no ConfigRollout names;
// rollout_namespace its namespace (namespace is the scrape's own label, the
// controller's).
type metrics struct {
	phase    *prometheus.GaugeVec
	step     *prometheus.GaugeVec
	pods     *prometheus.GaugeVec
	rollouts *prometheus.CounterVec
	scrapes  *prometheus.CounterVec
	patches  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		phase: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotreload_controller_rollout_phase",
			Help: "1 for the phase each rollout is in (Healthy, Progressing, Paused, Aborted, Failed), 0 for the others.",
		}, []string{"rollout_namespace", "rollout", "phase"}),
		step: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotreload_controller_rollout_step",
			Help: "The step each rollout is at, 1-based; 0 when none runs.",
		}, []string{"rollout_namespace", "rollout"}),
		pods: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotreload_controller_rollout_pods",
			Help: "Pods of each rollout: total (that use the source), updated (on the candidate), healthy (of those, applied, Ready, not restarted).",
		}, []string{"rollout_namespace", "rollout", "state"}),
		rollouts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_rollouts_total",
			Help: "Rollouts by result: started, promoted, aborted. Alert on increase(...{result=\"aborted\"}).",
		}, []string{"rollout_namespace", "rollout", "result"}),
		scrapes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_rollout_scrapes_total",
			Help: "GETs of sidecars' /-/content during rollouts, by result: ok or failed (the pod counts as not reported).",
		}, []string{"result"}),
		patches: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_revision_patches_total",
			Help: "Patches of pods' hotreload.dev/revisions annotation, by result: patched, gone (deleted), lost (the pod changed since read: decided again) or failed.",
		}, []string{"result"}),
	}
	for _, r := range []string{"ok", "failed"} {
		m.scrapes.WithLabelValues(r)
	}
	for _, r := range []string{"patched", "gone", "lost", "failed"} {
		m.patches.WithLabelValues(r)
	}
	return m
}

func (m *metrics) set(ns, rollout string, st State) {
	for _, p := range Phases {
		v := 0.0
		if p == st.Phase {
			v = 1
		}
		m.phase.WithLabelValues(ns, rollout, p).Set(v)
	}
	m.step.WithLabelValues(ns, rollout).Set(float64(st.Step))
	m.pods.WithLabelValues(ns, rollout, "total").Set(float64(st.Total))
	m.pods.WithLabelValues(ns, rollout, "updated").Set(float64(st.Updated))
	m.pods.WithLabelValues(ns, rollout, "healthy").Set(float64(st.Healthy))
}

func (m *metrics) drop(ns, rollout string) {
	l := prometheus.Labels{"rollout_namespace": ns, "rollout": rollout}
	m.phase.DeletePartialMatch(l)
	m.step.DeletePartialMatch(l)
	m.pods.DeletePartialMatch(l)
}

// reset drops the gauges when this replica stops leading.
func (m *metrics) reset() {
	m.phase.Reset()
	m.step.Reset()
	m.pods.Reset()
}
