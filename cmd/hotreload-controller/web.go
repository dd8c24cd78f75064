package main

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// handler serves the metrics of reg at telemetryPath, GET /-/healthy (200
// while the process runs) and GET /-/ready (200 once ready returns true,
// that is once the caches have synced, 503 before).
func handler(reg *prometheus.Registry, telemetryPath string, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(telemetryPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hotreload-controller is healthy.")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, r *http.Request) {
		if !ready() {
			http.Error(w, "hotreload-controller is not ready: the caches have not synced yet.", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "hotreload-controller is ready.")
	})
	return mux
}
