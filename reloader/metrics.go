package reloader

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	reloads  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lastOK   *prometheus.GaugeVec
	lastTS   *prometheus.GaugeVec
	content  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		reloads: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_reloads_total",
			Help: "Reload attempts by target and result (success or failure); each retry counts.",
		}, []string{"target", "result"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hotreload_reload_duration_seconds",
			Help:    "Time to deliver one change to a target, retries included, until it succeeded or its attempts ran out.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300},
		}, []string{"target"}),
		lastOK: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotreload_last_reload_successful",
			Help: "1 if the last reload attempt of the target succeeded (or none was made yet), 0 if it failed.",
		}, []string{"target"}),
		lastTS: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotreload_last_reload_success_timestamp_seconds",
			Help: "Unix time of the target's last successful reload.",
		}, []string{"target"}),
		content: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotreload_volume_content_info",
			Help: "1 for the content every target was last given, per volume: hash is the first 12 hex digits of its content value (HMAC-SHA256 under the content key, else SHA-256; none for a Secret volume without a key). One series per volume.",
		}, []string{"dir", "hash"}),
	}
}
