package deploy_test

// The kustomize base is the Helm chart: its objects are generated from the
// chart's default values, and each overlay renders (kubectl kustomize) to
// exactly what the chart renders with the values it stands for. kubectl's
// built-in kustomize renders them, as users apply them (kubectl apply -k);
// the kustomize Go API would add kustomize/api and kyaml to go.mod and move
// the versions the controller links, for nothing kubectl does not do.

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hotreload/hotreload/test/support/manifest"
)

var update = flag.Bool("update", false, "rewrite the files generated from the chart (make manifests)")

const (
	chart     = "../charts/hotreload"
	release   = "hotreload"
	namespace = "hotreload-system"
	monitor   = "serviceMonitor.enabled=true,podMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true"
)

// The files generated from the chart, and the helm template arguments that
// make each.
var generated = []struct {
	file string
	args []string
}{
	// --include-crds: helm install installs the chart's crds/ (the
	// ConfigRollout CRD); the base must too.
	{"base/hotreload.yaml", []string{"--include-crds"}},
	{"components/monitoring/monitoring.yaml", []string{"--set", monitor,
		"-s", "templates/servicemonitor.yaml", "-s", "templates/podmonitor.yaml",
		"-s", "templates/prometheusrule.yaml", "-s", "templates/dashboard.yaml"}},
	{"components/injector/injector.yaml", []string{"--set", "injector.enabled=true",
		"-s", "templates/injector-rbac.yaml", "-s", "templates/injector.yaml"}},
}

func TestGenerated(t *testing.T) {
	for _, g := range generated {
		t.Run(g.file, func(t *testing.T) {
			cmd := "helm template " + release + " charts/hotreload --namespace " + namespace
			if len(g.args) > 0 {
				cmd += " " + strings.Join(g.args, " ")
			}
			want := "# Generated from the Helm chart by make manifests (go test ./deploy -run TestGenerated -update):\n" +
				"#   " + strings.ReplaceAll(cmd, "templates/", "charts/hotreload/templates/") + "\n" +
				"# without Helm's own labels. Change the chart, not this file.\n" +
				string(manifest.StripHelm(manifest.Template(t, chart, release, namespace, g.args...)))
			got, err := os.ReadFile(g.file)
			if err != nil && !*update {
				t.Fatal(err)
			}
			if string(got) == want {
				return
			}
			if *update {
				if err := os.WriteFile(g.file, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Errorf("%s is not what the chart renders now: run make manifests", g.file)
		})
	}
}

// Each kustomization renders, and to the chart's objects for the values it
// stands for (Helm's own labels aside); the base adds the Namespace that
// helm install --create-namespace would.
func TestKustomizations(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		args []string
	}{
		{"base", nil},
		{"overlays/namespaced", []string{"--set", "controller.namespaces={team-a}"}},
		{"overlays/configmaps-only", []string{"--set", "controller.watchSecrets=false"}},
		{"overlays/monitoring", []string{"--set", monitor + ",serviceMonitor.labels.release=prometheus,podMonitor.labels.release=prometheus,prometheusRule.labels.release=prometheus"}},
		{"overlays/injector", []string{"--set", "injector.enabled=true"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			k, err := manifest.DecodeAll(manifest.Kustomize(t, tc.dir))
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v", tc.dir, err)
			}
			h, err := manifest.DecodeAll(manifest.Template(t, chart, release, namespace, append([]string{"--include-crds"}, tc.args...)...))
			if err != nil {
				t.Fatal(err)
			}
			ns := slices.IndexFunc(k, func(o manifest.Object) bool { return o.Kind == "Namespace" && o.Name == namespace })
			if ns < 0 {
				t.Fatalf("no Namespace %s", namespace)
			}
			k = slices.Delete(k, ns, ns+1)
			got, want := byKey(k), byKey(h)
			for _, key := range union(got, want) {
				g, w := got[key], want[key]
				switch {
				case g == nil:
					t.Errorf("%s: the chart has it, kustomize does not", key)
				case w == nil:
					t.Errorf("%s: kustomize has it, the chart does not", key)
				case !reflect.DeepEqual(g, w):
					t.Errorf("%s differs from the chart's:\n%s", key, diff(g, w))
				}
			}
		})
	}
}

// byKey indexes objects by key, without Helm's own labels.
func byKey(objs []manifest.Object) map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, o := range objs {
		for _, path := range [][]string{{"metadata", "labels"}, {"spec", "template", "metadata", "labels"}} {
			if labels, ok := dig(o.Map, path).(map[string]any); ok {
				for _, l := range manifest.HelmOnly {
					delete(labels, l)
				}
			}
		}
		m[o.Key()] = o.Map
	}
	return m
}

func dig(m map[string]any, path []string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func union(a, b map[string]map[string]any) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

// diff shows the lines of the two objects' YAML that differ.
func diff(got, want map[string]any) string {
	g, _ := yaml.Marshal(got)
	w, _ := yaml.Marshal(want)
	gl, wl := strings.Split(string(g), "\n"), strings.Split(string(w), "\n")
	var b bytes.Buffer
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			b.WriteString("kustomize: " + l + "\n")
		}
	}
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			b.WriteString("chart:     " + l + "\n")
		}
	}
	return b.String()
}
