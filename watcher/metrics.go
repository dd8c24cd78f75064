package watcher

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the watcher's metrics.
type metrics struct {
	changesTotal prometheus.Counter
	eventsTotal  prometheus.Counter
	errorsTotal  prometheus.Counter
	hashesTotal  prometheus.Counter
	watchedDirs  prometheus.Gauge
	missingDirs  *prometheus.GaugeVec
}

// newMetrics makes the metrics, registered with reg unless it is nil.
func newMetrics(reg prometheus.Registerer) metrics {
	var m metrics
	f := promauto.With(reg)
	m.changesTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_changes_total",
		Help: "Content changes detected in the watched directories.",
	})
	m.eventsTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_watch_events_total",
		Help: "Filesystem events received.",
	})
	m.errorsTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_watch_errors_total",
		Help: "Watch errors: unreadable entries, symlink loops, dangling links, broken volumes, event queue overflows, inotify failures.",
	})
	m.hashesTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_volume_hashes_total",
		Help: "Walks of a volume that hash what an app sees (files whose stat is unchanged are not read again). A kubelet update costs one; an edit in a plain directory none; the resync and the poll walk only a volume whose stats changed.",
	})
	m.watchedDirs = f.NewGauge(prometheus.GaugeOpts{
		Name: "hotreload_watched_dirs",
		Help: "Volume directories currently watched, by inotify or by polling.",
	})
	m.missingDirs = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hotreload_volume_missing",
		Help: "1 for a volume directory (not one declared optional) that has been missing or unreadable for more than 30s; no series otherwise.",
	}, []string{"dir"})
	return m
}
