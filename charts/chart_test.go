package charts_test

// These tests render the chart with helm template, with the default values
// and with others, and hold what comes out to what the controller needs and
// what the examples ship: every object decodes strictly into its API type,
// the controller's args parse with its own flag parser, RBAC is the least
// the controller uses, selectors select, alerts fire when they should (with
// promtool), the dashboard's queries parse, and every value is documented.
// Whether the API server takes the objects (server-side dry run) is for the
// real-cluster suite.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/hotreload/hotreload/controller/config"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/manifest"
)

var update = flag.Bool("update", false, "rewrite the values table of hotreload/README.md")

const (
	chart     = "hotreload"
	release   = "hotreload"
	namespace = "hotreload-system"
	// The controller's objects' name for a release named hotreload: the
	// name the examples use.
	name = "hotreload-controller"
)

func render(t *testing.T, args ...string) []manifest.Object {
	t.Helper()
	objs, err := manifest.DecodeAll(manifest.Template(t, chart, release, namespace, args...))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func keys(objs []manifest.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key())
	}
	sort.Strings(ks)
	return ks
}

func rules(rs []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%v %v %v %v", r.APIGroups, r.Resources, r.ResourceNames, r.Verbs))
	}
	return out
}

// The controller's rules where it watches, and those of its Lease.
var (
	rolloutRules = []string{"[] [configmaps] [] [get create update delete]", "[hotreload.dev] [configrollouts] [] [list watch patch]",
		"[hotreload.dev] [configrollouts/status] [] [update]", "[] [events] [] [create patch]"}
	watchRules     = append([]string{"[] [configmaps secrets] [] [list watch]", "[] [pods] [] [list watch patch]"}, rolloutRules...)
	configMapRules = append([]string{"[] [configmaps] [] [list watch]", "[] [pods] [] [list watch patch]"}, rolloutRules...)
	leaseRules     = []string{"[coordination.k8s.io] [leases] [] [create]", "[coordination.k8s.io] [leases] [hotreload-controller] [get update]"}
)

func controllerContainer(t *testing.T, objs []manifest.Object) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := manifest.Find[*appsv1.Deployment](t, objs, name)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

// parseArgs parses the container's args and literal environment as the
// controller would in a pod of the release's namespace.
func parseArgs(t *testing.T, c corev1.Container) (*config.Config, error) {
	t.Helper()
	for _, e := range c.Env {
		if e.Value != "" {
			t.Setenv(e.Name, e.Value)
		}
	}
	t.Setenv("HOTRELOAD_LEADER_ELECT_IDENTITY", "pod-0")
	return config.ParseIn(c.Args, namespace, "host")
}

func TestMain(m *testing.M) {
	// config.ParseIn reads HOTRELOAD_* variables as flag defaults; a
	// developer's shell must not change what the chart's args parse to.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "HOTRELOAD_") {
			os.Unsetenv(k)
		}
	}
	os.Exit(m.Run())
}

func TestLint(t *testing.T) {
	files, err := filepath.Glob("hotreload/ci/*-values.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no hotreload/ci/*-values.yaml: %v", err)
	}
	for _, f := range append([]string{""}, files...) {
		args := []string{"lint", "--strict", chart}
		if f != "" {
			args = append(args, "-f", f)
		}
		out, err := manifest.Run(manifest.Helm(t), args...)
		if err != nil {
			t.Errorf("values %q: %v", f, err)
		} else if !bytes.Contains(out, []byte("0 chart(s) failed")) {
			t.Errorf("values %q: helm lint says:\n%s", f, out)
		}
	}
}

// The default install: the controller and what it needs, nothing that needs
// a CRD, and the same Deployment, RBAC and hardening as
// examples/controller/controller.yaml.
func TestDefaults(t *testing.T) {
	objs := render(t)
	want := []string{
		"ClusterRole//" + name, "ClusterRoleBinding//" + name,
		"Deployment/" + namespace + "/" + name,
		"PodDisruptionBudget/" + namespace + "/" + name,
		"Role/" + namespace + "/" + name + "-leader-election",
		"RoleBinding/" + namespace + "/" + name + "-leader-election",
		"Service/" + namespace + "/" + name,
		"ServiceAccount/" + namespace + "/" + name,
	}
	if got := keys(objs); !slices.Equal(got, want) {
		t.Fatalf("objects\n%q\nwant\n%q", got, want)
	}
	for _, o := range objs {
		if o.Labels["app.kubernetes.io/name"] != "hotreload" || o.Labels["app.kubernetes.io/instance"] != release {
			t.Errorf("%s: labels %v lack the chart's", o.Key(), o.Labels)
		}
	}

	ex, err := os.ReadFile("../examples/controller/controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exObjs, err := manifest.DecodeAll(ex)
	if err != nil {
		t.Fatalf("examples/controller/controller.yaml: %v", err)
	}
	exDep := manifest.Find[*appsv1.Deployment](t, exObjs, name)
	exC := exDep.Spec.Template.Spec.Containers[0]

	d, c := controllerContainer(t, objs)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2: one leads, one stands by", d.Spec.Replicas)
	}
	spec := d.Spec.Template.Spec
	for _, cmp := range []struct {
		what      string
		got, want any
	}{
		{"pod securityContext", spec.SecurityContext, exDep.Spec.Template.Spec.SecurityContext},
		{"container securityContext", c.SecurityContext, exC.SecurityContext},
		{"resources", c.Resources, exC.Resources},
		{"liveness probe", c.LivenessProbe, exC.LivenessProbe},
		{"readiness probe", c.ReadinessProbe, exC.ReadinessProbe},
		{"ports", c.Ports, exC.Ports},
		{"env", c.Env, exC.Env},
		{"image", c.Image, exC.Image},
	} {
		if !equality.Semantic.DeepEqual(cmp.got, cmp.want) {
			t.Errorf("%s differs from examples/controller's:\n%+v\nwant\n%+v", cmp.what, cmp.got, cmp.want)
		}
	}
	if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		t.Error("no pod anti-affinity: both replicas may land on one node")
	}

	sa := manifest.Find[*corev1.ServiceAccount](t, objs, name)
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, sa.Name)
	}
	cr := manifest.Find[*rbacv1.ClusterRole](t, objs, name)
	if got := rules(cr.Rules); !slices.Equal(got, watchRules) {
		t.Errorf("ClusterRole rules %q, want %q", got, watchRules)
	}
	if got, want := rules(cr.Rules), rules(manifest.Find[*rbacv1.ClusterRole](t, exObjs, name).Rules); !slices.Equal(got, want) {
		t.Errorf("ClusterRole rules %q, examples/controller's %q", got, want)
	}
	role := manifest.Find[*rbacv1.Role](t, objs, name+"-leader-election")
	if got := rules(role.Rules); !slices.Equal(got, leaseRules) {
		t.Errorf("leader election Role rules %q, want %q", got, leaseRules)
	}
	crb := manifest.Find[*rbacv1.ClusterRoleBinding](t, objs, name)
	rb := manifest.Find[*rbacv1.RoleBinding](t, objs, name+"-leader-election")
	checkBinding(t, "ClusterRoleBinding", crb.RoleRef, crb.Subjects, "ClusterRole/"+cr.Name, sa)
	checkBinding(t, "RoleBinding", rb.RoleRef, rb.Subjects, "Role/"+role.Name, sa)

	cfg, err := parseArgs(t, c)
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	if !cfg.LeaderElect || cfg.LeaseNamespace != namespace || !slices.Equal(role.Rules[1].ResourceNames, []string{cfg.LeaseName}) {
		t.Errorf("leader election %v with the Lease %s/%s, but the Role allows %v", cfg.LeaderElect, cfg.LeaseNamespace, cfg.LeaseName, role.Rules[1].ResourceNames)
	}
	if len(cfg.Namespaces) != 0 {
		t.Errorf("namespaces %q, want every namespace", cfg.Namespaces)
	}

	// The Service and the PodDisruptionBudget select the controller's pods,
	// and the Service reaches the metrics port.
	pods := d.Spec.Template.Labels
	svc := manifest.Find[*corev1.Service](t, objs, name)
	if !selects(svc.Spec.Selector, pods) || !selects(d.Spec.Selector.MatchLabels, pods) {
		t.Errorf("Service selector %v, Deployment selector %v: not the pods' labels %v", svc.Spec.Selector, d.Spec.Selector.MatchLabels, pods)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" || svc.Spec.Ports[0].Name != "metrics" {
		t.Errorf("Service ports %+v, want metrics to the container's metrics port", svc.Spec.Ports)
	}
	pdb := manifest.Find[*policyv1.PodDisruptionBudget](t, objs, name)
	if !selects(pdb.Spec.Selector.MatchLabels, pods) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %+v: want maxUnavailable 1 of the controller's pods", pdb.Spec)
	}
}

func checkBinding(t *testing.T, what string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, want string, sa *corev1.ServiceAccount) {
	t.Helper()
	if got := ref.Kind + "/" + ref.Name; got != want {
		t.Errorf("%s binds %s, want %s", what, got, want)
	}
	if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Name != sa.Name || subjects[0].Namespace != sa.Namespace {
		t.Errorf("%s subjects %+v, want only the ServiceAccount %s/%s", what, subjects, sa.Namespace, sa.Name)
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// A namespaced install creates nothing cluster-wide: a Role and a
// RoleBinding per listed namespace, and --namespace for each.
func TestNamespaced(t *testing.T) {
	objs := render(t, "-f", "hotreload/ci/namespaced-values.yaml")
	if n := len(manifest.All[*rbacv1.ClusterRole](objs)) + len(manifest.All[*rbacv1.ClusterRoleBinding](objs)); n != 0 {
		t.Errorf("%d cluster-wide RBAC objects, want none", n)
	}
	sa := manifest.Find[*corev1.ServiceAccount](t, objs, name)
	var got []string
	for _, r := range manifest.All[*rbacv1.Role](objs) {
		if r.Name != name {
			continue
		}
		got = append(got, r.Namespace)
		if rs := rules(r.Rules); !slices.Equal(rs, watchRules) {
			t.Errorf("Role in %s: rules %q, want %q", r.Namespace, rs, watchRules)
		}
	}
	var bound []string
	for _, b := range manifest.All[*rbacv1.RoleBinding](objs) {
		if b.Name != name {
			continue
		}
		bound = append(bound, b.Namespace)
		checkBinding(t, "RoleBinding in "+b.Namespace, b.RoleRef, b.Subjects, "Role/"+name, sa)
	}
	want := []string{"team-a", "team-b"}
	if !slices.Equal(got, want) || !slices.Equal(bound, want) {
		t.Errorf("Roles in %q and RoleBindings in %q, want both in %q", got, bound, want)
	}
	_, c := controllerContainer(t, objs)
	cfg, err := parseArgs(t, c)
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	if !slices.Equal(cfg.Namespaces, want) {
		t.Errorf("the controller watches %q, want %q", cfg.Namespaces, want)
	}
	// The Lease stays in the release's namespace.
	manifest.Find[*rbacv1.Role](t, objs, name+"-leader-election")
}

// ConfigMaps only: no rule names Secrets, and the controller is told not
// to watch them.
func TestConfigMapsOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"cluster", []string{"-f", "hotreload/ci/configmaps-only-values.yaml"}},
		{"namespaced", []string{"-f", "hotreload/ci/configmaps-only-values.yaml", "-f", "hotreload/ci/namespaced-values.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.args...)
			n := 0
			for _, o := range objs {
				var rs []rbacv1.PolicyRule
				switch r := o.Typed.(type) {
				case *rbacv1.ClusterRole:
					rs = r.Rules
				case *rbacv1.Role:
					rs = r.Rules
				default:
					continue
				}
				for _, r := range rs {
					if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*") {
						t.Errorf("%s grants %v on %v", o.Key(), r.Verbs, r.Resources)
					}
				}
				if o.Name == name {
					n++
					if got := rules(rs); !slices.Equal(got, configMapRules) {
						t.Errorf("%s rules %q, want %q", o.Key(), got, configMapRules)
					}
				}
			}
			if n == 0 {
				t.Error("no role for the controller")
			}
			_, c := controllerContainer(t, objs)
			if !slices.Contains(c.Args, "--no-watch-secrets") {
				t.Errorf("args %q lack --no-watch-secrets", c.Args)
			}
		})
	}
}

// Every variant's args parse with the controller's own parser.
func TestControllerArgsParse(t *testing.T) {
	variants := [][]string{nil}
	files, _ := filepath.Glob("hotreload/ci/*-values.yaml")
	for _, f := range files {
		variants = append(variants, []string{"-f", f})
	}
	variants = append(variants, []string{"--set", "controller.replicas=1,controller.leaderElection.enabled=false"})
	for _, v := range variants {
		t.Run(strings.Join(v, " "), func(t *testing.T) {
			_, c := controllerContainer(t, render(t, v...))
			if _, err := parseArgs(t, c); err != nil {
				t.Errorf("args %q: %v", c.Args, err)
			}
		})
	}
}

// One replica without leader election; a bad combination of values is
// refused with one line that names the value.
func TestValues(t *testing.T) {
	objs := render(t, "--set", "controller.replicas=1,controller.leaderElection.enabled=false")
	if n := len(manifest.All[*rbacv1.Role](objs)); n != 0 {
		t.Errorf("%d Roles without leader election, want none (no Lease)", n)
	}
	_, c := controllerContainer(t, objs)
	if cfg, err := parseArgs(t, c); err != nil || cfg.LeaderElect {
		t.Errorf("args %q: leader election %v, %v", c.Args, cfg != nil && cfg.LeaderElect, err)
	}

	objs = render(t, "--set", "controller.image.tag=v9.9.9,injector.sidecar.image.tag=v9.9.9")
	if _, c := controllerContainer(t, objs); c.Image != "ghcr.io/hotreload/hotreload-controller:v9.9.9" {
		t.Errorf("image %s, want the tag given", c.Image)
	}

	// A label value that YAML reads as a boolean, as a user types it
	// (make e2e's first helm install failed on it: the API wants strings).
	objs = render(t, "--set", `injector.enabled=true,injector.namespaceSelector.matchLabels.team\.example/inject=true`)
	if ws := manifest.All[*admissionregistrationv1.MutatingWebhookConfiguration](objs); len(ws) != 1 || len(ws[0].Webhooks) == 0 ||
		ws[0].Webhooks[0].NamespaceSelector == nil || ws[0].Webhooks[0].NamespaceSelector.MatchLabels["team.example/inject"] != "true" {
		t.Errorf("the webhook's namespaceSelector does not select team.example/inject=true: %+v", ws)
	}

	for _, tc := range []struct {
		set, want string
	}{
		{"injector.nativeSidecars=maybe", `injector.nativeSidecars "maybe": must be auto, true or false`},
		{"injector.contentKey=always", `injector.contentKey "always": must be create, existing or off`},
		{"injector.certs.source=vault", `injector.certs.source "vault": must be self or cert-manager`},
		{"injector.failurePolicy=Retry", `injector.failurePolicy "Retry": must be Ignore or Fail`},
		{"injector.timeoutSeconds=60", "injector.timeoutSeconds 60: must be from 1 to 30"},
		{"injector.enabled=true,injector.port=9534", "injector.port 9534: the same as controller.port"},
		{"controller.replicas=2,controller.leaderElection.enabled=false", "controller.replicas 2 with leaderElection.enabled false"},
		{"controller.replicas=0", "controller.replicas: must be at least 1"},
		{"controller.workers=0", "controller.workers 0: must be from 1 to 100"},
		{"controller.namespaces={team_a}", `controller.namespaces: "team_a" is not a namespace name`},
		{"controller.logLevel=verbose", `controller.logLevel "verbose": must be debug, info, warn or error`},
		{"controller.logFormat=text", `controller.logFormat "text": must be logfmt or json`},
		{"networkPolicy.enabled=true,networkPolicy.egress.enabled=true", "networkPolicy.egress.enabled needs networkPolicy.egress.apiServerCIDRs"},
		{"serviceAccount.create=false", "serviceAccount.name is required when serviceAccount.create is false"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := manifest.Run(manifest.Helm(t), "template", release, chart, "--namespace", namespace, "--set", tc.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want it refused with %q", tc.set, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: %v\nwant %q", tc.set, err, tc.want)
			}
		})
	}
}

// Every optional object: the NetworkPolicy admits the metrics port and
// reaches the API server; the monitors scrape what the examples expose; the
// dashboard is the repository's JSON.
func TestEverything(t *testing.T) {
	objs := render(t, "-f", "hotreload/ci/everything-values.yaml")
	d, c := controllerContainer(t, objs)
	pods := d.Spec.Template.Labels
	if !strings.HasSuffix(c.Image, "@sha256:0000000000000000000000000000000000000000000000000000000000000000") {
		t.Errorf("image %s, want the digest", c.Image)
	}

	spec := d.Spec.Template.Spec
	if len(c.Env) != 2 || c.Env[0].Name != "HOTRELOAD_LEADER_ELECT_IDENTITY" || c.Env[1].Name != "GOMAXPROCS" {
		t.Errorf("env %+v: want the Lease identity, then controller.extraEnv", c.Env)
	}
	if len(spec.Tolerations) != 1 || len(spec.TopologySpreadConstraints) != 1 || spec.NodeSelector["kubernetes.io/os"] != "linux" ||
		spec.PriorityClassName != "system-cluster-critical" || len(spec.ImagePullSecrets) != 1 ||
		spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.PodAntiAffinity != nil {
		t.Errorf("pod spec %+v lacks the scheduling values given (the affinity given replaces the default)", spec)
	}
	if d.Spec.Template.Labels["team"] != "platform" || d.Spec.Template.Annotations["example.com/owner"] != "platform" || !selects(d.Spec.Selector.MatchLabels, pods) {
		t.Errorf("pod labels %v, annotations %v: want controller.podLabels and podAnnotations beside the selector's", pods, d.Spec.Template.Annotations)
	}
	if sa := manifest.Find[*corev1.ServiceAccount](t, objs, name); sa.Annotations["example.com/role"] != "hotreload" {
		t.Errorf("ServiceAccount annotations %v", sa.Annotations)
	}

	np := manifest.Find[*networkingv1.NetworkPolicy](t, objs, name)
	if !selects(np.Spec.PodSelector.MatchLabels, pods) {
		t.Errorf("NetworkPolicy selects %v, not the controller's pods", np.Spec.PodSelector.MatchLabels)
	}
	if len(np.Spec.Ingress) != 2 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "metrics" || len(np.Spec.Ingress[0].From) != 1 {
		t.Errorf("ingress %+v, want the metrics port from the monitoring namespace, and the injector's webhook", np.Spec.Ingress)
	} else if in := np.Spec.Ingress[1]; len(in.Ports) != 1 || in.Ports[0].Port.String() != "webhook" || len(in.From) != 0 {
		t.Errorf("ingress %+v, want the webhook port from anywhere (the API server)", in)
	}
	if len(np.Spec.Egress) != 2 || len(np.Spec.Egress[0].To) != 1 || np.Spec.Egress[0].To[0].IPBlock == nil || np.Spec.Egress[0].To[0].IPBlock.CIDR != "10.0.0.1/32" {
		t.Errorf("egress %+v, want the API server's address, and the sidecars' port", np.Spec.Egress)
	} else if e := np.Spec.Egress[1]; len(e.Ports) != 1 || e.Ports[0].Port.IntValue() != 9533 {
		t.Errorf("egress %+v, want the sidecars' metrics port (rollouts read their /-/content)", e)
	}
	pdb := manifest.Find[*policyv1.PodDisruptionBudget](t, objs, name)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget %+v, want minAvailable 2 alone", pdb.Spec)
	}

	sms := manifest.Kind(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	var sm struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			Endpoints []struct {
				Port     string `json:"port"`
				Interval string `json:"interval"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	remarshal(t, sms[0].Map, &sm)
	svc := manifest.Find[*corev1.Service](t, objs, name)
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) || !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("ServiceMonitor selects %v in %v, not the Service (labels %v) in %s", sm.Spec.Selector.MatchLabels, sm.Spec.NamespaceSelector.MatchNames, svc.Labels, namespace)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Interval != "15s" {
		t.Errorf("ServiceMonitor endpoints %+v, want the Service's port %s every 15s", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
	if sms[0].Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", sms[0].Labels)
	}

	checkPodMonitor(t, objs)

	cms := manifest.All[*corev1.ConfigMap](objs)
	if len(cms) != 1 {
		t.Fatalf("%d ConfigMaps, want the dashboard's", len(cms))
	}
	dash, err := os.ReadFile("hotreload/dashboards/hotreload.json")
	if err != nil {
		t.Fatal(err)
	}
	if cms[0].Labels["grafana_dashboard"] != "1" || cms[0].Annotations["grafana_folder"] != "hotreload" {
		t.Errorf("dashboard ConfigMap labels %v, annotations %v", cms[0].Labels, cms[0].Annotations)
	}
	if got := cms[0].Data["hotreload.json"]; got != strings.TrimRight(string(dash), "\n") {
		t.Errorf("the ConfigMap's hotreload.json (%d bytes) is not dashboards/hotreload.json (%d bytes)", len(got), len(dash))
	}

	rules := prometheusRules(t, objs)
	if got, want := alertNames(rules), []string{
		"HotreloadContentLeftBehind", "HotreloadControllerDown", "HotreloadControllerNotLeading",
		"HotreloadInjectionMissed", "HotreloadNudgesFailing", "HotreloadReloadFailing", "HotreloadRolloutAborted",
	}; !slices.Equal(got, want) {
		t.Errorf("alerts %q, want %q", got, want)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Labels["team"] != "platform" || r.Labels["severity"] != "warning" {
				t.Errorf("%s: labels %v, want severity and prometheusRule.alertLabels", r.Alert, r.Labels)
			}
			if g.Name == "hotreload-sidecars" && strings.Count(r.Expr, `hotreload_`) != strings.Count(r.Expr, `{namespace="team-a"}`) {
				t.Errorf("%s: the sidecar selector is not on every metric: %s", r.Alert, r.Expr)
			}
		}
	}
}

type relabeling struct {
	SourceLabels []string `json:"sourceLabels"`
	Regex        string   `json:"regex"`
	Action       string   `json:"action"`
	TargetLabel  string   `json:"targetLabel"`
}

// The PodMonitor scrapes the port and container of every example's
// sidecar, in the namespaces asked for.
func checkPodMonitor(t *testing.T, objs []manifest.Object) {
	t.Helper()
	pms := manifest.Kind(objs, "PodMonitor")
	if len(pms) != 1 {
		t.Fatalf("%d PodMonitors, want 1", len(pms))
	}
	var pm struct {
		Spec struct {
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			Endpoints []struct {
				Port        string       `json:"port"`
				Relabelings []relabeling `json:"relabelings"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	remarshal(t, pms[0].Map, &pm)
	if !slices.Equal(pm.Spec.NamespaceSelector.MatchNames, []string{"team-a"}) {
		t.Errorf("PodMonitor namespaces %v, want team-a", pm.Spec.NamespaceSelector.MatchNames)
	}
	if len(pm.Spec.Endpoints) != 1 {
		t.Fatalf("PodMonitor endpoints %+v, want 1", pm.Spec.Endpoints)
	}
	ep := pm.Spec.Endpoints[0]
	ex, err := os.ReadFile("../examples/controller/workload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exObjs, err := manifest.DecodeAll(ex)
	if err != nil {
		t.Fatal(err)
	}
	var sidecar *corev1.Container
	for _, d := range manifest.All[*appsv1.Deployment](exObjs) {
		for i, c := range d.Spec.Template.Spec.Containers {
			if strings.HasPrefix(c.Image, "ghcr.io/hotreload/hotreload:") {
				sidecar = &d.Spec.Template.Spec.Containers[i]
			}
		}
	}
	if sidecar == nil || len(sidecar.Ports) != 1 {
		t.Fatal("examples/controller/workload.yaml: no sidecar with one port")
	}
	keep := slices.IndexFunc(ep.Relabelings, func(r relabeling) bool {
		return r.Action == "keep" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_container_name"})
	})
	if ep.Port != sidecar.Ports[0].Name || keep < 0 || ep.Relabelings[keep].Regex != sidecar.Name {
		t.Errorf("PodMonitor scrapes port %q of containers %+v; the example's sidecar is %q with port %q", ep.Port, ep.Relabelings, sidecar.Name, sidecar.Ports[0].Name)
	}
	jobs := 0
	for _, r := range ep.Relabelings {
		if r.TargetLabel == "job" {
			jobs++
		}
	}
	if jobs == 0 {
		t.Error("PodMonitor does not set job to the workload: the alerts and the dashboard group by it")
	}
}

func remarshal(t *testing.T, in map[string]any, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

func prometheusRules(t *testing.T, objs []manifest.Object) ruleFile {
	t.Helper()
	prs := manifest.Kind(objs, "PrometheusRule")
	if len(prs) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(prs))
	}
	var pr struct {
		Spec ruleFile `json:"spec"`
	}
	remarshal(t, prs[0].Map, &pr)
	return pr.Spec
}

func alertNames(rf ruleFile) []string {
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	sort.Strings(names)
	return names
}

// The alerts that wait for metrics not exported yet are off by default;
// each alert can be switched off on its own.
func TestAlertSwitches(t *testing.T) {
	all := []string{"HotreloadContentLeftBehind", "HotreloadControllerDown", "HotreloadControllerNotLeading", "HotreloadNudgesFailing", "HotreloadReloadFailing", "HotreloadRolloutAborted"}
	if got := alertNames(prometheusRules(t, render(t, "--set", "prometheusRule.enabled=true"))); !slices.Equal(got, all) {
		t.Errorf("default alerts %q, want %q (injectionMissed without the injector)", got, all)
	}
	off := "prometheusRule.enabled=true,prometheusRule.alerts.reloadFailing.enabled=false,prometheusRule.alerts.contentLeftBehind.enabled=false"
	rf := prometheusRules(t, render(t, "--set", off))
	if got := alertNames(rf); !slices.Equal(got, []string{"HotreloadControllerDown", "HotreloadControllerNotLeading", "HotreloadNudgesFailing", "HotreloadRolloutAborted"}) {
		t.Errorf("with the sidecar alerts off: %q", got)
	}
	if len(rf.Groups) != 1 {
		t.Errorf("%d groups, want only the controller's (no empty group)", len(rf.Groups))
	}
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		e2etest.SkipOrFail(t, "promtool not installed (Debian's prometheus package has it): the alerts and the dashboard's queries are not checked")
	}
	return p
}

// The alerts parse and fire when, and only when, they should: promtool
// runs them over series that testdata/alerts-test.yaml writes.
func TestAlertsFire(t *testing.T) {
	pt := promtool(t)
	rf := prometheusRules(t, render(t, "--set", "prometheusRule.enabled=true,prometheusRule.alerts.rolloutAborted.enabled=true,injector.enabled=true"))
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "rules.yaml"), rf)
	if out, err := manifest.Run(pt, "check", "rules", filepath.Join(dir, "rules.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	tests, err := os.ReadFile("testdata/alerts-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts-test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	// Every alert is tested.
	for _, a := range alertNames(rf) {
		if !bytes.Contains(tests, []byte("alertname: "+a+"\n")) {
			t.Errorf("testdata/alerts-test.yaml does not test %s", a)
		}
	}
	out, err := manifest.Run(pt, "test", "rules", filepath.Join(dir, "alerts-test.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func writeYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

var metricName = regexp.MustCompile(`\bhotreload_[a-z_]+`)

// documented says whether a metric is in a metric table of docs/metrics.md,
// or (for the alerts that wait for it) named in docs/design/fleet.md.
func documented(t *testing.T) func(string) bool {
	metrics, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := os.ReadFile("../docs/design/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	return func(m string) bool {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m = strings.TrimSuffix(m, suffix)
		}
		return bytes.Contains(metrics, []byte("| `"+m)) || bytes.Contains(fleet, []byte("`"+m+"{"))
	}
}

// Every metric an alert or the dashboard uses is one the binaries document.
func TestMetricsDocumented(t *testing.T) {
	isDocumented := documented(t)
	rf := prometheusRules(t, render(t, "-f", "hotreload/ci/everything-values.yaml"))
	var exprs []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	for _, p := range dashboardPanels(t) {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			if !isDocumented(m) {
				t.Errorf("%s (in %s) is in no metric table of docs/metrics.md", m, e)
			}
		}
	}
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	b, err := os.ReadFile("hotreload/dashboards/hotreload.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string  `json:"uid"`
		Title      string  `json:"title"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboards/hotreload.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: want both", d.UID, d.Title)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Equal(vars, []string{"datasource", "namespace", "job"}) {
		t.Errorf("dashboard variables %q", vars)
	}
	return d.Panels
}

// The dashboard shows reloads, failures and which pods run which content,
// and every query parses as PromQL.
func TestDashboard(t *testing.T) {
	panels := dashboardPanels(t)
	ids := map[int]bool{}
	all := ""
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			all += tg.Expr + "\n"
		}
	}
	for _, m := range []string{"hotreload_reloads_total", "hotreload_last_reload_successful", "hotreload_volume_content_info", "hotreload_controller_nudges_total"} {
		if !strings.Contains(all, m) {
			t.Errorf("no panel queries %s", m)
		}
	}

	// promtool checks the queries as recording rules, with Grafana's
	// variables replaced by what they expand to.
	pt := promtool(t)
	vars := strings.NewReplacer(`"$namespace"`, `".*"`, `"$job"`, `".*"`, "$__rate_interval", "5m", "$__range", "1h")
	var rf struct {
		Groups []map[string]any `json:"groups"`
	}
	var rs []rule
	for _, p := range panels {
		for _, tg := range p.Targets {
			if strings.Contains(vars.Replace(tg.Expr), "$") {
				t.Errorf("panel %q: a variable the test does not know: %s", p.Title, tg.Expr)
			}
			rs = append(rs, rule{Record: fmt.Sprintf("dashboard:panel%d:%s", p.ID, tg.RefID), Expr: vars.Replace(tg.Expr)})
		}
	}
	rf.Groups = append(rf.Groups, map[string]any{"name": "dashboard", "rules": rs})
	file := filepath.Join(t.TempDir(), "dashboard.yaml")
	writeYAML(t, file, rf)
	if out, err := manifest.Run(pt, "check", "rules", file); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// The chart and the examples name the same images, at the chart's
// appVersion: a release bumps them together.
func TestImagesMatchExamples(t *testing.T) {
	b, err := os.ReadFile("hotreload/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ch struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &ch); err != nil {
		t.Fatal(err)
	}
	if "v"+ch.Version != ch.AppVersion {
		t.Errorf("Chart.yaml version %s, appVersion %s: a release bumps both (vX.Y.Z and X.Y.Z)", ch.Version, ch.AppVersion)
	}
	want := map[string]bool{
		"ghcr.io/hotreload/hotreload-controller:" + ch.AppVersion: true,
		"ghcr.io/hotreload/hotreload:" + ch.AppVersion:            true,
	}
	images := regexp.MustCompile(`ghcr\.io/hotreload/[a-z-]+:[^\s"']+`)
	err = filepath.WalkDir("../examples", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, img := range images.FindAllString(string(b), -1) {
			if !want[img] {
				t.Errorf("%s names %s; the chart's appVersion is %s", path, img, ch.AppVersion)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := manifest.Run(manifest.Helm(t), "install", release, chart, "--namespace", namespace, "--dry-run=client")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(notes, []byte("ghcr.io/hotreload/hotreload:"+ch.AppVersion)) {
		t.Errorf("the install notes do not name the sidecar's image ghcr.io/hotreload/hotreload:%s:\n%s", ch.AppVersion, notes)
	}
}

// The README's values table is made from values.yaml's "# --" comments;
// go test ./charts -run TestValuesTable -update rewrites it.
func TestValuesTable(t *testing.T) {
	vals, err := os.ReadFile("hotreload/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := valuesTable(vals)
	if err != nil {
		t.Fatal(err)
	}
	const file = "hotreload/README.md"
	readme, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const start, end = "<!-- values table: made from values.yaml by go test ./charts -run TestValuesTable -update -->\n", "<!-- end of values table -->\n"
	i, j := bytes.Index(readme, []byte(start)), bytes.Index(readme, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no values table between %q and %q", file, start, end)
	}
	table := "| value | default | meaning |\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
	if got := string(readme[i+len(start) : j]); got != table {
		if *update {
			out := slices.Concat(readme[:i+len(start)], []byte(table), readme[j:])
			if err := os.WriteFile(file, out, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's values table is not values.yaml's (go test ./charts -run TestValuesTable -update):\n%s", file, diffLines(got, table))
	}
}

func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}
