//go:build e2e

package e2e

// The Helm chart (charts/hotreload) and the kustomize base (deploy/) in the
// real cluster: every variant passes a server-side dry run (the Prometheus
// Operator's CRDs installed from the Go module proxy, so that the monitors
// and the rules are checked against their real schema too), and the chart,
// installed with helm as a user would, runs the controller: two replicas,
// one holding the Lease, and an edit of a ConfigMap nudges the pod that
// mounts it.
//
// Written before make e2e ran Deployments, Services and kube-proxy (the
// cluster with a full control plane); first run in the round that brings
// it. The chart's controller watches only its test's namespace, so that it
// never nudges the pods of TestController, which runs beside it.

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/manifest"
)

const (
	chartDir     = "../../charts/hotreload"
	chartRelease = "e2e"
	chartNS      = "hotreload-chart"
	// The Prometheus Operator whose CRDs (example/prometheus-operator-crd in
	// its module) the dry run installs.
	promOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// createNamespace creates ns unless it exists.
func createNamespace(t *testing.T, ns string) {
	t.Helper()
	if _, err := kubectl(nil, "create", "namespace", ns); err != nil && !strings.Contains(err.Error(), "AlreadyExists") && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// installMonitoringCRDs installs the CRDs of the kinds the chart renders
// (ServiceMonitor, PodMonitor, PrometheusRule) from the Prometheus
// Operator's module, fetched through the Go module proxy.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", promOperator).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", promOperator, err)
	}
	var dir string
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && k == `"Dir"` {
			dir = strings.Trim(v, `",`)
		}
	}
	if dir == "" {
		t.Fatalf("go mod download %s: no Dir in\n%s", promOperator, out)
	}
	for _, kind := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		f := filepath.Join(dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml")
		// Server-side: the CRDs are too big for kubectl's last-applied annotation.
		mustKubectl(t, nil, "apply", "--server-side", "--force-conflicts", "-f", f)
		mustKubectl(t, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+kind+".monitoring.coreos.com")
	}
}

// TestChartDryRun sends what the chart renders with each of its ci values,
// and every kustomization of deploy/, to the API server: it checks every
// object against the real schema, unknown fields included. Not parallel:
// deploy/ names the namespace of the shipped controller, which TestRollout
// runs beside the parallel tests with other labels, and a dry run of an
// update to its selector is refused.
func TestChartDryRun(t *testing.T) {
	installMonitoringCRDs(t)
	// The namespaces the variants name: the release's, and those of the
	// namespaced values and overlay.
	for _, ns := range []string{controllerNS, chartNS, "team-a", "team-b"} {
		createNamespace(t, ns)
	}
	files, err := filepath.Glob(chartDir + "/ci/*-values.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s/ci/*-values.yaml: %v", chartDir, err)
	}
	for _, f := range append([]string{""}, files...) {
		name := "default"
		var args []string
		if f != "" {
			name, args = filepath.Base(f), []string{"-f", f}
		}
		t.Run("chart "+name, func(t *testing.T) {
			out := manifest.Template(t, chartDir, chartRelease, chartNS, args...)
			mustKubectl(t, out, "apply", "--dry-run=server", "-f", "-")
		})
	}
	dirs, err := filepath.Glob("../../deploy/overlays/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]string{"../../deploy/base"}, dirs...) {
		t.Run("kustomize "+strings.TrimPrefix(d, "../../"), func(t *testing.T) {
			mustKubectl(t, nil, "apply", "--dry-run=server", "-k", d)
		})
	}
}

// TestChartInstall installs the chart with helm, as the README says, with
// the locally built controller image, and uninstalls it. Not parallel:
// TestRollout runs the shipped controller beside the parallel tests, and
// it would nudge this test's workload too (it opts in), so that the nudge
// would not prove that the chart's controller works.
func TestChartInstall(t *testing.T) {
	helm := manifest.Helm(t)
	ns := namespace(t)
	createNamespace(t, chartNS)
	name := chartRelease + "-hotreload-controller"
	mustHelm := func(args ...string) string {
		t.Helper()
		out, err := manifest.Run(helm, args...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	mustHelm("install", chartRelease, chartDir, "--namespace", chartNS, "--wait", "--timeout", "3m",
		"--set", "controller.namespaces={"+ns+"}",
		"--set", "controller.image.repository=localhost/hotreload-controller,controller.image.tag=e2e,controller.image.pullPolicy=Never")
	uninstalled := false
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, chartNS)
		}
		if !uninstalled {
			_, _ = manifest.Run(helm, "uninstall", chartRelease, "--namespace", chartNS, "--wait")
		}
	})
	mustKubectl(t, nil, "-n", chartNS, "rollout", "status", "deployment/"+name, "--timeout=2m")
	pods := strings.Fields(mustKubectl(t, nil, "-n", chartNS, "get", "pods", "-l", "app.kubernetes.io/instance="+chartRelease, "-o", "jsonpath={.items[*].metadata.name}"))
	if len(pods) != 2 {
		t.Fatalf("controller pods %q, want 2", pods)
	}
	holder := func() string {
		out, _ := kubectl(nil, "-n", chartNS, "get", "lease", name, "-o", "jsonpath={.spec.holderIdentity}")
		return strings.TrimSpace(out)
	}
	waitFor(t, podWait, func() bool { h := holder(); return h == pods[0] || h == pods[1] },
		func() string {
			return "the Lease " + name + " is held by " + holder() + ", not by a replica of " + strings.Join(pods, ", ")
		})

	// The shipped workload, as shipped (load-images.sh tagged the local
	// images with the names it gives): an edit of its ConfigMap nudges its pod.
	apply(t, ns, readManifest(t, "examples/controller/workload.yaml"))
	mustKubectl(t, nil, "-n", ns, "rollout", "status", "deployment/my-app", "--timeout=2m")
	pod := strings.TrimSpace(mustKubectl(t, nil, "-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=my-app", "-o", "jsonpath={.items[0].metadata.name}"))
	patchConfigMap(t, ns, "my-app-config", map[string]string{"app.yaml": "greeting: hello from the chart\n"})
	want := "configmap/my-app-config@" + resourceVersion(t, ns, "configmap", "my-app-config")
	start := time.Now()
	waitFor(t, nudgeWait, func() bool { return nudgedValue(ns, pod) == want },
		func() string { return "pod " + pod + " has " + nudgedValue(ns, pod) + ", want " + want })
	figure(t, "chart install: edit to pod nudged %.2fs", time.Since(start).Seconds())

	mustHelm("uninstall", chartRelease, "--namespace", chartNS, "--wait")
	uninstalled = true
	if out, err := kubectl(nil, "-n", ns, "get", "role", name); err == nil {
		t.Errorf("the Role %s/%s outlived helm uninstall:\n%s", ns, name, out)
	}
}
