package injector

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	injections     *prometheus.CounterVec
	reviewDuration prometheus.Histogram
	missed         prometheus.Counter
	rotations      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, missing func() map[string]int, certExpiry func() float64) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		injections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_injections_total",
			Help: "Pods with hotreload.dev/ annotations that the injector admitted, by result: injected (the sidecar added), present (it was there), invalid (admitted unchanged: an annotation or the pod did not suit, see the warning), excluded (a namespace it never injects into), error.",
		}, []string{"result"}),
		reviewDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "hotreload_controller_injection_duration_seconds",
			Help:    "Time the injector took to answer an admission review of a pod with hotreload.dev/ annotations.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		missed: f.NewCounter(prometheus.CounterOpts{
			Name: "hotreload_controller_injections_missed_total",
			Help: "Pods that opted in but were admitted without the sidecar (the webhook unreachable, or the pod unsuitable), each counted once by the leader when it found it.",
		}),
		rotations: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_controller_injector_certificate_rotations_total",
			Help: "Certificates the leader made for the injector's webhook, by kind: ca (a new CA signs) or cert (a new serving certificate).",
		}, []string{"kind"}),
	}
	for _, r := range []string{ResultInjected, ResultPresent, ResultInvalid, ResultExcluded, ResultError} {
		m.injections.WithLabelValues(r)
	}
	for _, k := range []string{"ca", "cert"} {
		m.rotations.WithLabelValues(k)
	}
	reg.MustRegister(missingPods{missing})
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hotreload_controller_injector_certificate_expiry_timestamp_seconds",
		Help: "When the certificate this replica serves the webhook with expires; 0 before it has one.",
	}, certExpiry)
	return m
}

// missingPods is hotreload_controller_injection_missed_pods: per namespace,
// the pods that opted in and run without the sidecar now. The label is
// pod_namespace, since a scrape adds namespace for the controller's own.
type missingPods struct{ count func() map[string]int }

var missingPodsDesc = prometheus.NewDesc("hotreload_controller_injection_missed_pods",
	"Pods that opted in to hotreload and run without its sidecar now, by namespace, as this replica sees them.",
	[]string{"pod_namespace"}, nil)

func (m missingPods) Describe(ch chan<- *prometheus.Desc) { ch <- missingPodsDesc }

func (m missingPods) Collect(ch chan<- prometheus.Metric) {
	for ns, n := range m.count() {
		ch <- prometheus.MustNewConstMetric(missingPodsDesc, prometheus.GaugeValue, float64(n), ns)
	}
}
