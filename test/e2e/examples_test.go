//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotreload/hotreload/test/support/binary"
)

// hotreloadPort is where every example's hotreload serves its metrics, and
// the port of each example's Service that leads there.
const hotreloadPort = 9533

// exampleApp describes how to see, from outside, which config an example's
// app runs.
type exampleApp struct {
	configMap, key string // the ConfigMap the test edits, and its key
	edit           func(string) string
	port           int    // the app's port in the pod
	servicePort    int    // the port of the example's Service that leads to it; 0: no Service
	path, marker   string // GET path shows marker once the app runs the new config
}

var exampleApps = map[string]exampleApp{
	"prometheus": {
		configMap: "prometheus-config", key: "prometheus.yml",
		edit: func(s string) string {
			return s + "  - job_name: e2e-added\n    static_configs:\n      - targets: [\"127.0.0.1:9999\"]\n"
		},
		port: 9090, servicePort: 9090, path: "/api/v1/status/config", marker: "e2e-added",
	},
	"alertmanager": {
		configMap: "alertmanager-config", key: "alertmanager.yml",
		edit: func(s string) string { return s + "  - name: e2e-added\n" },
		port: 9093, servicePort: 9093, path: "/api/v2/status", marker: "e2e-added",
	},
	"nginx": {
		configMap: "nginx-config", key: "default.conf",
		edit: func(s string) string {
			return strings.Replace(s, "hello from config v1", "hello from config e2e-added", 1)
		},
		port: 8080, servicePort: 80, path: "/", marker: "e2e-added",
	},
	"generic": {
		configMap: "my-app-config", key: "app.yaml",
		edit: func(s string) string { return strings.Replace(s, "greeting: hello", "greeting: e2e-added", 1) },
		port: 8080, servicePort: 80, path: "/config", marker: "e2e-added",
	},
}

// TestExamples applies each shipped example as it is, waits for its
// Deployment to roll out, edits its ConfigMap, and checks that the app
// serves the new config, on its pod's address and through its Service, and
// that hotreload, scraped through the Service, reports the reload as
// successful.
func TestExamples(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, app, deployment, service string }{
		{"prometheus/sidecar.yaml", "prometheus", "prometheus", "prometheus"},
		{"prometheus/native-sidecar.yaml", "prometheus", "prometheus", "prometheus"},
		{"alertmanager/sidecar.yaml", "alertmanager", "alertmanager", "alertmanager"},
		{"alertmanager/native-sidecar.yaml", "alertmanager", "alertmanager", "alertmanager"},
		{"nginx/sidecar.yaml", "nginx", "nginx", "nginx"},
		{"nginx/native-sidecar.yaml", "nginx", "nginx", "nginx"},
		{"generic/sidecar.yaml", "generic", "my-app", "my-app"},
		{"generic/native-sidecar.yaml", "generic", "my-app", "my-app"},
		// The kustomize component adds hotreload to a Deployment of the
		// overlay's, which ships no Service.
		{"kustomize-example", "alertmanager", "alertmanager", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t)
			if strings.HasSuffix(c.name, ".yaml") {
				mustKubectl(t, nil, "-n", ns, "apply", "-f", "../../examples/"+c.name)
			} else {
				mustKubectl(t, nil, "-n", ns, "apply", "-k", "../../examples/"+c.name)
			}
			p := onePod(t, ns, c.deployment)

			app := exampleApps[c.app]
			if _, body, _ := binary.Get(p.url(app.port, app.path)); strings.Contains(body, app.marker) {
				t.Fatalf("%s shows %q before the edit:\n%s", p.url(app.port, app.path), app.marker, body)
			}
			editConfigMap(t, ns, app.configMap, app.key, app.edit)
			nudge(t, ns, p.Metadata.Name)
			waitBody(t, nudgeWait, p.url(app.port, app.path), app.marker)
			metrics := p.url(hotreloadPort, "/metrics")
			if c.service != "" {
				waitBody(t, nudgeWait, serviceURL(t, ns, c.service, app.servicePort, app.path), app.marker)
				metrics = serviceURL(t, ns, c.service, hotreloadPort, "/metrics")
			}
			// A signal reload is counted once nginx has replaced its
			// workers, which it may do after it serves the new config.
			waitMetric(t, nudgeWait, metrics, "hotreload_reloads_total", map[string]string{"result": "success"}, 1)
			waitMetric(t, nudgeWait, metrics, "hotreload_last_reload_successful", nil, 1)
		})
	}
}

// TestExamplesDryRun sends every manifest in examples/ to the API server as
// shipped, untransformed: the server checks it against the real schema,
// unknown fields included.
func TestExamplesDryRun(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	files, err := filepath.Glob("../../examples/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel("../../examples", f)
		dir := filepath.Dir(rel)
		switch {
		case dir == "helm":
			continue // Helm values files, not manifests; examples_test.go checks them
		case dir == "kustomize" || dir == "kustomize-example" || strings.HasPrefix(dir, "controller-"):
			continue // parts of a kustomization, applied whole below
		case filepath.Base(rel) == "kustomization.yaml":
			continue // applied whole below
		}
		t.Run(rel, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			target := []string{"-n", ns}
			for _, o := range decode(t, b) {
				// A file that names its objects' namespaces (or makes
				// them) is applied there: they must exist for a dry run.
				n := dig[string](o, "metadata", "namespace")
				if o["kind"] == "Namespace" {
					n = dig[string](o, "metadata", "name")
				}
				if n != "" {
					target = nil
					_, _ = kubectl(nil, "create", "namespace", n)
				}
			}
			mustKubectl(t, b, append(target, "apply", "--dry-run=server", "-f", "-")...)
		})
	}
	t.Run("kustomize-example", func(t *testing.T) {
		mustKubectl(t, nil, "-n", ns, "apply", "--dry-run=server", "-k", "../../examples/kustomize-example")
	})
	// The controller and its variants name their namespaces: those must
	// exist for a dry run of the objects in them.
	for _, n := range []string{controllerNS, "shop", "web"} {
		_, _ = kubectl(nil, "create", "namespace", n)
	}
	for _, dir := range []string{"controller", "controller-configmaps-only", "controller-namespaced", "injector"} {
		t.Run(dir, func(t *testing.T) {
			mustKubectl(t, nil, "apply", "--dry-run=server", "-k", "../../examples/"+dir)
		})
	}
}

// TestDryRunRejectsMistakes: the server-side dry run that TestExamplesDryRun
// relies on rejects the mistakes examples_test.go no longer checks by hand.
func TestDryRunRejectsMistakes(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	good := readManifest(t, "examples/prometheus/sidecar.yaml")
	for _, c := range []struct{ name, old, new, want string }{
		{"misspelt field", "readOnlyRootFilesystem: true", "readOnlyRootFilesytem: true", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFilesytem"`},
		{"field at the wrong level", "      automountServiceAccountToken: false", "      automountServiceAccountToken: false\n      readOnlyRootFilesystem: true", `unknown field "spec.template.spec.readOnlyRootFilesystem"`},
		{"wrong type", "runAsUser: 65532", "runAsUser: sixty", "runAsUser"},
		{"unknown kind", "kind: Deployment", "kind: Deploymnet", "Deploymnet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := strings.Replace(string(good), c.old, c.new, 1)
			if bad == string(good) {
				t.Fatalf("the example has no %q to break", c.old)
			}
			_, err := kubectl([]byte(bad), "-n", ns, "apply", "--dry-run=server", "-f", "-")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("dry run of a manifest with a %s: %v; want an error with %q", c.name, err, c.want)
			}
		})
	}
}

// editConfigMap replaces one key of a ConfigMap by edit of its value.
func editConfigMap(t *testing.T, ns, name, key string, edit func(string) string) {
	t.Helper()
	patchConfigMap(t, ns, name, map[string]string{key: edit(configMapValue(t, ns, name, key))})
}

// configMapValue returns one key of a ConfigMap, exactly (kubectl's
// jsonpath output drops a trailing newline).
func configMapValue(t *testing.T, ns, name, key string) string {
	t.Helper()
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal([]byte(mustKubectl(t, nil, "-n", ns, "get", "configmap", name, "-o", "json")), &cm); err != nil {
		t.Fatal(err)
	}
	v, ok := cm.Data[key]
	if !ok {
		t.Fatalf("configmap %s/%s has no key %q", ns, name, key)
	}
	return v
}
