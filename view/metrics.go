package view

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	info      *prometheus.GaugeVec
	rollbacks *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		info: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotreload_view_revision_info",
			Help: "1 for the revision a view's app directory holds, with the view's result (applied, pending, rejected, waiting). One series per view; the revision is opaque (a resourceVersion, or 12 hex digits naming content).",
		}, []string{"ref", "revision", "result"}),
		rollbacks: f.NewCounterVec(prometheus.CounterOpts{
			Name: "hotreload_view_rollbacks_total",
			Help: "Times the app refused a view's revision and the last-known-good version was put back.",
		}, []string{"ref"}),
	}
}
