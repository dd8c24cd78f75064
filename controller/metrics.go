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
	nudges *prometheus.CounterVec
	lag    prometheus.Histogram
	leader prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, queueDepth func() float64, optedIn func() float64) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		nudges: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_nudges_total",
			Help: "Pod annotations patched to make the kubelet sync a pod now, by result: patched, gone (pod deleted or replaced) or failed.",
		}, []string{"result"}),
		lag: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "hotreload_controller_nudge_lag_seconds",
			Help:    "Time from the controller seeing a new version of a ConfigMap or Secret to a pod's patch being done.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		leader: f.NewGauge(prometheus.GaugeOpts{
			Name: "hotreload_controller_leader",
			Help: "1 while this replica is the leader and patches pods, 0 while it stands by.",
		}),
	}
	for _, r := range []string{ResultPatched, ResultGone, ResultFailed} {
		m.nudges.WithLabelValues(r)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hotreload_controller_queue_depth",
		Help: "ConfigMaps and Secrets waiting for their pods to be nudged.",
	}, queueDepth)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hotreload_controller_pods",
		Help: "Pods that opted in with the hotreload.dev/nudge annotation, running or not.",
	}, optedIn)
	return m
}
