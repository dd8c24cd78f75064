package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The results of a nudge, the values of the result label.
const (
	ResultPatched = "patched" // the pod was annotated
	ResultGone    = "gone"    // the pod was deleted or replaced before the patch
	ResultFailed  = "failed"  // the patch failed; the object is retried with backoff
)

type metrics struct {
	nudges    *prometheus.CounterVec
	givenUp   prometheus.Counter
	lag       prometheus.Histogram
	leader    prometheus.Gauge
	apiErrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, queueDepth func() float64, optedIn func() float64) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		nudges: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_nudges_total",
			Help: "Pod annotations patched to make the kubelet sync a pod now, by result: patched, gone (pod deleted or replaced) or failed.",
		}, []string{"result"}),
		givenUp: f.NewCounter(prometheus.CounterOpts{
			Name: "hotreload_controller_nudges_given_up_total",
			Help: "Pods whose nudge failed every retry; the kubelet's periodic sync updates them.",
		}),
		lag: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "hotreload_controller_nudge_lag_seconds",
			Help:    "Time from the controller seeing a new version of a ConfigMap or Secret to a pod's patch being done, coalescing included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		leader: f.NewGauge(prometheus.GaugeOpts{
			Name: "hotreload_controller_leader",
			Help: "1 while this replica is the leader and patches pods, 0 while it stands by.",
		}),
		apiErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_api_errors_total",
			Help: "Calls to the API server that failed, by verb and resource (list, watch or patch pods; list or watch configmaps or secrets; get, create or update leases).",
		}, []string{"verb", "resource"}),
	}
	for _, c := range everyAPICallKind {
		m.apiErrors.WithLabelValues(c.verb, c.resource)
	}
	for _, r := range []string{ResultPatched, ResultGone, ResultFailed} {
		m.nudges.WithLabelValues(r)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hotreload_controller_queue_depth",
		Help: "Pods queued to be nudged now; pods that wait for a burst of changes to settle are not counted.",
	}, queueDepth)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hotreload_controller_pods",
		Help: "Pods that opted in with the hotreload.dev/nudge annotation, running or not.",
	}, optedIn)
	return m
}
