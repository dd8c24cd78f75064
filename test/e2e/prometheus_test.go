//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/hotreload/hotreload/test/support/binary"
)

// TestPrometheusInvalidConfig: Prometheus refuses an invalid config with a
// 500 and keeps its old one; hotreload shows the reload as failed; the fixed
// config then reloads.
func TestPrometheusInvalidConfig(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	apply(t, ns, readManifest(t, "examples/prometheus/sidecar.yaml"))
	p := onePod(t, ns, "prometheus")
	status, hotreloadMetrics := p.url(9090, "/api/v1/status/config"), p.url(hotreloadPort, "/metrics")
	orig := configMapValue(t, ns, "prometheus-config", "prometheus.yml")

	broken := strings.Replace(orig, "scrape_interval: 30s", "scrape_interval: e2e-not-a-duration", 1)
	if broken == orig {
		t.Fatal("the example's prometheus.yml has no scrape_interval: 30s to break")
	}
	patchConfigMap(t, ns, "prometheus-config", map[string]string{"prometheus.yml": broken})
	nudge(t, ns, p.Metadata.Name)
	waitMetric(t, nudgeWait, hotreloadMetrics, "hotreload_last_reload_successful", nil, 0)
	if v, _, _ := metric(hotreloadMetrics, "hotreload_reloads_total", map[string]string{"result": "failure"}); v < 1 {
		t.Fatalf(`hotreload_reloads_total{result="failure"} = %v after Prometheus refused the config`, v)
	}
	waitMetric(t, nudgeWait, p.url(9090, "/metrics"), "prometheus_config_last_reload_successful", nil, 0)
	if _, body, _ := binary.Get(status); !strings.Contains(body, "30s") || strings.Contains(body, "e2e-not-a-duration") {
		t.Fatalf("Prometheus does not run its old config after refusing the new one:\n%s", body)
	}

	fixed := orig + "  - job_name: e2e-fixed\n    static_configs:\n      - targets: [\"127.0.0.1:9999\"]\n"
	patchConfigMap(t, ns, "prometheus-config", map[string]string{"prometheus.yml": fixed})
	nudge(t, ns, p.Metadata.Name)
	waitBody(t, nudgeWait, status, "e2e-fixed")
	waitMetric(t, nudgeWait, hotreloadMetrics, "hotreload_last_reload_successful", nil, 1)
}
