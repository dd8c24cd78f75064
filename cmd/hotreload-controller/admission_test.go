package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/controller/config"
	"github.com/hotreload/hotreload/test/support/e2etest"
)

// The ValidatingAdmissionPolicy of examples/controller/admission-policy.yaml:
// its shape and whom it binds, checked here; its CEL evaluated here with
// cel-go (the library the API server evaluates it with) on pods as plain
// objects; and the API server's own verdict on the controller's real token
// in make e2e (TestControllerAdmissionPolicy).

func admissionPolicy(t *testing.T) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	objs := decodeManifests(t, "admission-policy.yaml")
	return only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs), only[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs)
}

var usernameLiteral = regexp.MustCompile(`^request\.userInfo\.username == '([^']+)'$`)

func TestAdmissionPolicyManifest(t *testing.T) {
	p, b := admissionPolicy(t)
	objs := decodeManifests(t, "controller.yaml")
	sa := only[*corev1.ServiceAccount](t, objs)
	d := only[*appsv1.Deployment](t, objs)
	if d.Spec.Template.Spec.ServiceAccountName != sa.Name {
		t.Fatalf("the Deployment runs as %s, not as the ServiceAccount %s", d.Spec.Template.Spec.ServiceAccountName, sa.Name)
	}

	if len(p.Spec.MatchConditions) != 1 {
		t.Fatalf("%d match conditions, want 1 naming the controller's service account", len(p.Spec.MatchConditions))
	}
	m := usernameLiteral.FindStringSubmatch(p.Spec.MatchConditions[0].Expression)
	if want := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name; m == nil || m[1] != want {
		t.Errorf("match condition %q, want the user %s", p.Spec.MatchConditions[0].Expression, want)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Error("failurePolicy is not Fail: a policy that cannot be evaluated would let every patch through")
	}
	rules := p.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].APIGroups, []string{""}) || !slices.Equal(rules[0].Resources, []string{"pods"}) ||
		!slices.Equal(rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) {
		t.Errorf("resource rules %+v, want UPDATE of pods", rules)
	}
	for i, v := range p.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden || !strings.HasPrefix(v.Message, "hotreload-controller may change only hotreload.dev/ annotations") {
			t.Errorf("validation %d: reason %v, message %q", i, v.Reason, v.Message)
		}
	}
	if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) || b.Spec.ParamRef != nil {
		t.Errorf("binding %+v: want the policy %s, Deny, no parameters", b.Spec, p.Name)
	}
}

// celProgram compiles a policy expression as the API server would, but
// with object, oldObject and request untyped.
func celProgram(t *testing.T, expr string) cel.Program {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	return prg
}

func celBool(t *testing.T, prg cel.Program, vars map[string]any) bool {
	t.Helper()
	out, _, err := prg.Eval(vars)
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		t.Fatalf("evaluates to %v, not a bool", out)
	}
	return b
}

func TestAdmissionPolicyIntent(t *testing.T) {
	p, _ := admissionPolicy(t)
	match := celProgram(t, p.Spec.MatchConditions[0].Expression)
	for user, want := range map[string]bool{
		"system:serviceaccount:hotreload-system:hotreload-controller":      true,
		"system:serviceaccount:hotreload-system:hotreload-controller-evil": false,
		"system:serviceaccount:default:hotreload-controller":               false,
		"kubernetes-admin":     false,
		"system:node:worker-1": false,
	} {
		req := map[string]any{"userInfo": map[string]any{"username": user}}
		if got := celBool(t, match, map[string]any{"request": req}); got != want {
			t.Errorf("the policy applies to %s: %v, want %v", user, got, want)
		}
	}

	var validations []cel.Program
	for _, v := range p.Spec.Validations {
		validations = append(validations, celProgram(t, v.Expression))
	}
	// denied returns the message of the first validation that refuses the
	// update from old to new, "" if none does.
	denied := func(old, new *corev1.Pod) string {
		vars := map[string]any{"object": plain(t, new), "oldObject": plain(t, old)}
		for i, prg := range validations {
			if !celBool(t, prg, vars) {
				return p.Spec.Validations[i].Message
			}
		}
		return ""
	}
	base := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "shop", ResourceVersion: "7",
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				controller.AnnotationNudge: "true", controller.AnnotationNudged: "configmap/web@6",
				"prometheus.io/scrape": "true",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs-uid"}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
	}
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		want   string // a word of the message; "" allowed
	}{
		{"nothing", func(*corev1.Pod) {}, ""},
		{"its nudge annotation", func(p *corev1.Pod) { p.Annotations[controller.AnnotationNudged] = "configmap/web@8" }, ""},
		{"its revisions annotation (rollouts)", func(p *corev1.Pod) { p.Annotations[controller.AnnotationRevisions] = `{"configmap/web":"9"}` }, ""},
		{"a new hotreload.dev/ annotation", func(p *corev1.Pod) { p.Annotations["hotreload.dev/revisions"] = `{"configmap/web":"8"}` }, ""},
		{"a hotreload.dev/ annotation removed", func(p *corev1.Pod) { delete(p.Annotations, controller.AnnotationNudged) }, ""},
		{"the image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example/evil:1" }, "spec"},
		{"a container's command", func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"sh"} }, "spec"},
		{"a label", func(p *corev1.Pod) { p.Labels["app"] = "payments" }, "labels"},
		{"a label added", func(p *corev1.Pod) { p.Labels["team"] = "x" }, "labels"},
		{"every label removed", func(p *corev1.Pod) { p.Labels = nil }, "labels"},
		{"a finalizer added", func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} }, "finalizers"},
		{"the owner removed", func(p *corev1.Pod) { p.OwnerReferences = nil }, "owners"},
		{"another annotation", func(p *corev1.Pod) { p.Annotations["prometheus.io/scrape"] = "false" }, "annotations"},
		{"another annotation added", func(p *corev1.Pod) { p.Annotations["example.com/x"] = "y" }, "annotations"},
		{"another annotation removed", func(p *corev1.Pod) { delete(p.Annotations, "prometheus.io/scrape") }, "annotations"},
		{"every annotation removed", func(p *corev1.Pod) { p.Annotations = nil }, "annotations"},
		{"a look-alike prefix", func(p *corev1.Pod) { p.Annotations["hotreload.dev.evil/x"] = "y" }, "annotations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base.DeepCopy()
			tt.change(p)
			got := denied(base, p)
			switch {
			case tt.want == "" && got != "":
				t.Errorf("refused: %s", got)
			case tt.want != "" && (got == "" || !strings.Contains(got, tt.want)):
				t.Errorf("refused with %q, want a refusal naming %s", got, tt.want)
			}
		})
	}
	// A pod without labels or annotations: the controller's first nudge.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: base.Spec}
	nudged := bare.DeepCopy()
	nudged.Annotations = map[string]string{controller.AnnotationNudged: "configmap/web@8"}
	if got := denied(bare, nudged); got != "" {
		t.Errorf("the first annotation of a bare pod refused: %s", got)
	}
	labelled := bare.DeepCopy()
	labelled.Labels = map[string]string{"app": "x"}
	if got := denied(bare, labelled); got == "" {
		t.Error("a label added to a pod without labels allowed")
	}
}

// plain is the pod as an untyped object, as CEL sees it.
func plain(t *testing.T, p *corev1.Pod) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// kustomize renders a directory of examples/ with kubectl's built-in
// kustomize.
func kustomize(t *testing.T, dir string) []any {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		e2etest.SkipOrFail(t, "kubectl not installed: the kustomize variants of the controller are not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", "../../examples/"+dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return decodeDocuments(t, dir, out)
}

func all[T any](objs []any) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func rulesOf(rs []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%v %v %v %v", r.APIGroups, r.Resources, r.ResourceNames, r.Verbs))
	}
	return out
}

// parsedArgs parses the controller container's args as the binary would.
func parsedArgs(t *testing.T, objs []any) *config.Config {
	t.Helper()
	d := only[*appsv1.Deployment](t, objs)
	cfg, err := config.ParseIn(d.Spec.Template.Spec.Containers[0].Args, "hotreload-system", "pod")
	if err != nil {
		t.Fatalf("args %q: %v", d.Spec.Template.Spec.Containers[0].Args, err)
	}
	return cfg
}

// TestControllerVariants renders the kustomize variants of the controller
// and holds each to what its name promises.
func TestControllerVariants(t *testing.T) {
	rollouts := []string{"[] [configmaps] [] [get create update delete]", "[hotreload.dev] [configrollouts] [] [list watch patch]",
		"[hotreload.dev] [configrollouts/status] [] [update]", "[] [events] [] [create patch]"}
	workload := append([]string{"[] [configmaps secrets] [] [list watch]", "[] [pods] [] [list watch patch]"}, rollouts...)

	t.Run("controller", func(t *testing.T) {
		objs := kustomize(t, "controller")
		only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs)
		if got := rulesOf(only[*rbacv1.ClusterRole](t, objs).Rules); !slices.Equal(got, workload) {
			t.Errorf("ClusterRole %q, want %q", got, workload)
		}
		if cfg := parsedArgs(t, objs); !cfg.WatchSecrets || len(cfg.Namespaces) != 0 {
			t.Errorf("args watch secrets %v in %q, want secrets in every namespace", cfg.WatchSecrets, cfg.Namespaces)
		}
	})

	t.Run("configmaps only", func(t *testing.T) {
		objs := kustomize(t, "controller-configmaps-only")
		only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs)
		want := append([]string{"[] [configmaps] [] [list watch]", "[] [pods] [] [list watch patch]"}, rollouts...)
		if got := rulesOf(only[*rbacv1.ClusterRole](t, objs).Rules); !slices.Equal(got, want) {
			t.Errorf("ClusterRole %q, want %q", got, want)
		}
		for _, r := range all[*rbacv1.Role](objs) {
			for _, rule := range r.Rules {
				if slices.Contains(rule.Resources, "secrets") {
					t.Errorf("Role %s/%s grants %v on secrets", r.Namespace, r.Name, rule.Verbs)
				}
			}
		}
		if cfg := parsedArgs(t, objs); cfg.WatchSecrets {
			t.Error("the controller still watches Secrets: --no-watch-secrets is missing")
		}
	})

	t.Run("namespaced", func(t *testing.T) {
		objs := kustomize(t, "controller-namespaced")
		only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs)
		if n := len(all[*rbacv1.ClusterRole](objs)) + len(all[*rbacv1.ClusterRoleBinding](objs)); n != 0 {
			t.Errorf("%d cluster-wide roles and bindings, want none", n)
		}
		cfg := parsedArgs(t, objs)
		if len(cfg.Namespaces) == 0 {
			t.Fatal("no --namespace: the controller would watch every namespace, with no right to")
		}
		sa := only[*corev1.ServiceAccount](t, objs)
		roles := map[string]*rbacv1.Role{}
		for _, r := range all[*rbacv1.Role](objs) {
			if r.Namespace != sa.Namespace {
				roles[r.Namespace] = r
			}
		}
		bound := map[string]bool{}
		for _, b := range all[*rbacv1.RoleBinding](objs) {
			r, ok := roles[b.Namespace]
			if !ok || b.Namespace == sa.Namespace {
				continue
			}
			if b.RoleRef.Kind != "Role" || b.RoleRef.Name != r.Name || len(b.Subjects) != 1 ||
				b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa.Name || b.Subjects[0].Namespace != sa.Namespace {
				t.Errorf("RoleBinding %s/%s: %+v %+v", b.Namespace, b.Name, b.RoleRef, b.Subjects)
				continue
			}
			bound[b.Namespace] = true
		}
		for _, ns := range cfg.Namespaces {
			r, ok := roles[ns]
			if !ok || !bound[ns] {
				t.Errorf("--namespace=%s has no Role bound to the controller", ns)
				continue
			}
			if got := rulesOf(r.Rules); !slices.Equal(got, workload) {
				t.Errorf("Role %s/%s %q, want %q", ns, r.Name, got, workload)
			}
		}
		for ns := range roles {
			if !slices.Contains(cfg.Namespaces, ns) {
				t.Errorf("a Role in %s, which no --namespace names", ns)
			}
		}
	})
}
