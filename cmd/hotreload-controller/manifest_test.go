package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/controller/config"
)

// The shipped manifests of examples/controller, decoded strictly as the API
// server would (an unknown or misplaced field fails), and held to least
// privilege and the secure defaults.

var kinds = map[string]func() any{
	"v1/Namespace":      func() any { return new(corev1.Namespace) },
	"v1/ServiceAccount": func() any { return new(corev1.ServiceAccount) },
	"v1/ConfigMap":      func() any { return new(corev1.ConfigMap) },
	"rbac.authorization.k8s.io/v1/ClusterRole":                         func() any { return new(rbacv1.ClusterRole) },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding":                  func() any { return new(rbacv1.ClusterRoleBinding) },
	"rbac.authorization.k8s.io/v1/Role":                                func() any { return new(rbacv1.Role) },
	"rbac.authorization.k8s.io/v1/RoleBinding":                         func() any { return new(rbacv1.RoleBinding) },
	"apps/v1/Deployment":                                               func() any { return new(appsv1.Deployment) },
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":        func() any { return new(admissionregistrationv1.ValidatingAdmissionPolicy) },
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": func() any { return new(admissionregistrationv1.ValidatingAdmissionPolicyBinding) },
	"admissionregistration.k8s.io/v1/MutatingWebhookConfiguration":     func() any { return new(admissionregistrationv1.MutatingWebhookConfiguration) },
	"v1/Service": func() any { return new(corev1.Service) },
	"apiextensions.k8s.io/v1/CustomResourceDefinition": func() any { return new(crdObject) },
}

// crdObject is a CustomResourceDefinition, whose spec the API server
// checks (make e2e applies it) and controller/rollout's tests read.
type crdObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              map[string]any `json:"spec"`
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func decodeManifests(t *testing.T, file string) []any {
	t.Helper()
	if !strings.Contains(file, "/") {
		file = "controller/" + file
	}
	b, err := os.ReadFile("../../examples/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return decodeDocuments(t, file, b)
}

func decodeDocuments(t *testing.T, file string, b []byte) []any {
	t.Helper()
	var objs []any
	for i, doc := range separator.Split(string(b), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s document %d: %v", file, i, err)
		}
		if tm.Kind == "" {
			continue
		}
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			t.Fatalf("%s document %d: unexpected kind %s/%s", file, i, tm.APIVersion, tm.Kind)
		}
		obj := newObj()
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("%s document %d: %v", file, i, err)
		}
		strict, err := sigsjson.UnmarshalStrict(j, obj)
		if err == nil {
			err = errors.Join(strict...)
		}
		if err != nil {
			t.Fatalf("%s document %d (%s): %v", file, i, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func only[T any](t *testing.T, objs []any) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T, want 1", len(found), zero)
	}
	return found[0]
}

func TestControllerManifest(t *testing.T) {
	objs := decodeManifests(t, "controller.yaml")
	const ns = "hotreload-system"
	if n := only[*corev1.Namespace](t, objs); n.Name != ns {
		t.Errorf("namespace %s, want %s", n.Name, ns)
	}
	sa := only[*corev1.ServiceAccount](t, objs)
	for _, o := range objs {
		m := o.(metav1.ObjectMetaAccessor).GetObjectMeta()
		switch o.(type) {
		case *corev1.Namespace, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
		default:
			if m.GetNamespace() != ns {
				t.Errorf("%T %s is in namespace %q, want %s", o, m.GetName(), m.GetNamespace(), ns)
			}
		}
	}

	// Least privilege: the verbs the informers, the patches and the leader
	// election use, and nothing else.
	rules := func(rs []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%v %v %v %v", r.APIGroups, r.Resources, r.ResourceNames, r.Verbs))
		}
		return out
	}
	cr := only[*rbacv1.ClusterRole](t, objs)
	wantCluster := []string{"[] [configmaps secrets] [] [list watch]", "[] [pods] [] [list watch patch]",
		"[] [configmaps] [] [get create update delete]", "[hotreload.dev] [configrollouts] [] [list watch patch]",
		"[hotreload.dev] [configrollouts/status] [] [update]", "[] [events] [] [create patch]"}
	if got := rules(cr.Rules); !slices.Equal(got, wantCluster) {
		t.Errorf("ClusterRole rules %q, want %q", got, wantCluster)
	}
	role := only[*rbacv1.Role](t, objs)
	wantRole := []string{"[coordination.k8s.io] [leases] [] [create]", "[coordination.k8s.io] [leases] [hotreload-controller] [get update]"}
	if got := rules(role.Rules); !slices.Equal(got, wantRole) {
		t.Errorf("Role rules %q, want %q", got, wantRole)
	}
	crb, rb := only[*rbacv1.ClusterRoleBinding](t, objs), only[*rbacv1.RoleBinding](t, objs)
	for _, b := range []struct {
		name     string
		ref      rbacv1.RoleRef
		subjects []rbacv1.Subject
		want     string
	}{
		{"ClusterRoleBinding", crb.RoleRef, crb.Subjects, "ClusterRole/" + cr.Name},
		{"RoleBinding", rb.RoleRef, rb.Subjects, "Role/" + role.Name},
	} {
		if got := b.ref.Kind + "/" + b.ref.Name; got != b.want {
			t.Errorf("%s binds %s, want %s", b.name, got, b.want)
		}
		if len(b.subjects) != 1 || b.subjects[0].Kind != "ServiceAccount" || b.subjects[0].Name != sa.Name || b.subjects[0].Namespace != ns {
			t.Errorf("%s subjects %+v, want only the ServiceAccount %s/%s", b.name, b.subjects, ns, sa.Name)
		}
	}

	d := only[*appsv1.Deployment](t, objs)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2: one leads, one stands by", d.Spec.Replicas)
	}
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, sa.Name)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		sc.RunAsGroup == nil || *sc.RunAsGroup != 65532 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container security context %+v: want non-root 65532:65532, read-only root, no privilege escalation, all capabilities dropped", sc)
	}
	if psc := spec.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod has no RuntimeDefault seccomp profile")
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9534 {
		t.Errorf("ports %+v, want metrics on 9534", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"/-/healthy": c.LivenessProbe, "/-/ready": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe of %s: %+v", name, p)
		}
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want a memory request and limit", c.Resources)
	}
	// Each replica needs its own identity in the Lease: the pod's name.
	idEnv := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "HOTRELOAD_LEADER_ELECT_IDENTITY" })
	if idEnv < 0 || c.Env[idEnv].ValueFrom == nil || c.Env[idEnv].ValueFrom.FieldRef == nil || c.Env[idEnv].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Error("HOTRELOAD_LEADER_ELECT_IDENTITY does not come from metadata.name")
	}
	// The args and the environment parse as the binary would parse them,
	// and the Lease is the one the Role allows.
	for _, e := range c.Env {
		if e.Value != "" {
			t.Setenv(e.Name, e.Value)
		}
	}
	t.Setenv("HOTRELOAD_LEADER_ELECT_IDENTITY", d.Name+"-0")
	cfg, err := config.ParseIn(c.Args, ns, "pod")
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	if cfg.LeaseNamespace != ns || !slices.Equal(role.Rules[1].ResourceNames, []string{cfg.LeaseName}) {
		t.Errorf("Lease %s/%s, but the Role allows %s/%v", cfg.LeaseNamespace, cfg.LeaseName, ns, role.Rules[1].ResourceNames)
	}
	if !cfg.LeaderElect || cfg.Identity != d.Name+"-0" {
		t.Errorf("leader election %v as %q", cfg.LeaderElect, cfg.Identity)
	}
}

// TestSecretRolloutsManifest: Secret data is granted per namespace, by a
// RoleBinding of a ClusterRole that nothing binds cluster-wide.
func TestSecretRolloutsManifest(t *testing.T) {
	objs := decodeManifests(t, "secret-rollouts.yaml")
	cr := only[*rbacv1.ClusterRole](t, objs)
	if len(cr.Rules) != 1 || !slices.Equal(cr.Rules[0].Resources, []string{"secrets"}) || !slices.Equal(cr.Rules[0].Verbs, []string{"get", "create", "update", "delete"}) {
		t.Errorf("rules %+v, want get, create, update and delete of secrets", cr.Rules)
	}
	rb := only[*rbacv1.RoleBinding](t, objs)
	if rb.Namespace != "" || rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != cr.Name {
		t.Errorf("binding %+v: want a RoleBinding of the ClusterRole %s that names no namespace (kubectl apply -n places it)", rb, cr.Name)
	}
	for _, o := range decodeManifests(t, "controller.yaml") {
		if b, ok := o.(*rbacv1.ClusterRoleBinding); ok && b.RoleRef.Name == cr.Name {
			t.Errorf("controller.yaml binds %s cluster-wide", cr.Name)
		}
	}
}

func TestWorkloadManifestOptsIn(t *testing.T) {
	objs := decodeManifests(t, "workload.yaml")
	d := only[*appsv1.Deployment](t, objs)
	if v := d.Spec.Template.Annotations[controller.AnnotationNudge]; v != "true" {
		t.Errorf("pod template annotation %s = %q, want \"true\"", controller.AnnotationNudge, v)
	}
	cm := only[*corev1.ConfigMap](t, objs)
	tmpl := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: d.Spec.Template.Spec}
	if ks := controller.Mounts(tmpl); len(ks) != 1 || ks[0].Name != cm.Name || ks[0].Kind != controller.ConfigMap {
		t.Errorf("the workload mounts %v, want the ConfigMap %s", ks, cm.Name)
	}
	var buf bytes.Buffer
	for _, c := range d.Spec.Template.Spec.Containers {
		buf.WriteString(c.Name + " ")
	}
	if !strings.Contains(buf.String(), "hotreload") {
		t.Errorf("containers %s: no hotreload sidecar", buf.String())
	}
}

// The injector's part of the install (examples/injector): what the API
// server needs to call it, and what its token needs, named as the flags'
// defaults name them, and nothing more.
func TestInjectorManifest(t *testing.T) {
	const ns = "hotreload-system"
	objs := decodeManifests(t, "injector/injector.yaml")

	// The controller's Deployment as the kustomization patches it: the
	// args parse, with the injector on.
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Patches    []struct {
			Target map[string]string `json:"target"`
			Patch  string            `json:"patch"`
		} `json:"patches"`
	}
	b, err := os.ReadFile("../../examples/injector/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Patches) != 1 || !slices.Equal(k.Resources, []string{"../controller", "injector.yaml"}) {
		t.Fatalf("kustomization %+v", k)
	}
	d := decodeDocuments(t, "kustomization.yaml patch", []byte(k.Patches[0].Patch))[0].(*appsv1.Deployment)
	c := d.Spec.Template.Spec.Containers[0]
	cfg, err := config.ParseIn(c.Args, ns, "pod")
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	ic := cfg.Injector
	if !ic.Enabled || ic.Namespace != ns || ic.Certs != "self" {
		t.Errorf("injector %+v", ic)
	}
	_, port, _ := strings.Cut(ic.ListenAddress, ":")
	if len(c.Ports) != 1 || c.Ports[0].Name != "webhook" || fmt.Sprint(c.Ports[0].ContainerPort) != port {
		t.Errorf("ports %+v, want webhook on %s", c.Ports, port)
	}

	svc := only[*corev1.Service](t, objs)
	if svc.Name != ic.Service || svc.Namespace != ns || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook" {
		t.Errorf("Service %s/%s %+v", svc.Namespace, svc.Name, svc.Spec.Ports)
	}
	if svc.Spec.Selector["app.kubernetes.io/name"] != "hotreload-controller" {
		t.Errorf("the Service selects %v", svc.Spec.Selector)
	}

	wh := only[*admissionregistrationv1.MutatingWebhookConfiguration](t, objs)
	if wh.Name != ic.Webhook || len(wh.Webhooks) != 1 {
		t.Fatalf("webhook configuration %s with %d webhooks", wh.Name, len(wh.Webhooks))
	}
	w := wh.Webhooks[0]
	ref := w.ClientConfig.Service
	switch {
	case ref == nil || ref.Name != ic.Service || ref.Namespace != ns || ref.Path == nil || *ref.Path != "/inject" || ref.Port == nil || *ref.Port != 443:
		t.Errorf("client config %+v", w.ClientConfig)
	case w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore:
		t.Error("failurePolicy is not Ignore: an injector that is down would stop every pod it matches")
	case w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun:
		t.Error("sideEffects is not NoneOnDryRun (it creates the content key, never on a dry run)")
	case w.ClientConfig.CABundle != nil:
		t.Error("a caBundle in the manifest: the leader writes it")
	case len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) ||
		!slices.Equal(w.Rules[0].Resources, []string{"pods"}) || !slices.Equal(w.Rules[0].APIGroups, []string{""}):
		t.Errorf("rules %+v, want CREATE of pods only", w.Rules)
	case w.TimeoutSeconds == nil || *w.TimeoutSeconds > 10:
		t.Errorf("timeoutSeconds %v", w.TimeoutSeconds)
	}
	excluded := w.NamespaceSelector.MatchExpressions
	if len(excluded) != 1 || excluded[0].Key != "kubernetes.io/metadata.name" || excluded[0].Operator != metav1.LabelSelectorOpNotIn ||
		!slices.Contains(excluded[0].Values, "kube-system") || !slices.Contains(excluded[0].Values, ns) {
		t.Errorf("namespaceSelector %+v: want kube-system and %s left out", w.NamespaceSelector, ns)
	}
	if len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, "startsWith('hotreload.dev/')") {
		t.Errorf("matchConditions %+v", w.MatchConditions)
	}

	rules := func(rs []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%v %v %v %v", r.APIGroups, r.Resources, r.ResourceNames, r.Verbs))
		}
		return out
	}
	cr := only[*rbacv1.ClusterRole](t, objs)
	wantCluster := []string{
		"[] [secrets] [" + ic.ContentKeySecret + "] [get]",
		"[] [secrets] [] [create]",
		"[] [events] [] [create patch]",
		"[admissionregistration.k8s.io] [mutatingwebhookconfigurations] [" + ic.Webhook + "] [get list watch update]",
	}
	if got := rules(cr.Rules); !slices.Equal(got, wantCluster) {
		t.Errorf("ClusterRole rules %q, want %q", got, wantCluster)
	}
	role := only[*rbacv1.Role](t, objs)
	if got, want := rules(role.Rules), []string{"[] [secrets] [" + ic.CertSecret + "] [get list watch update]"}; !slices.Equal(got, want) || role.Namespace != ns {
		t.Errorf("Role rules %q, want %q", got, want)
	}
	crb, rb := only[*rbacv1.ClusterRoleBinding](t, objs), only[*rbacv1.RoleBinding](t, objs)
	for _, subjects := range [][]rbacv1.Subject{crb.Subjects, rb.Subjects} {
		if len(subjects) != 1 || subjects[0].Name != "hotreload-controller" || subjects[0].Namespace != ns {
			t.Errorf("subjects %+v", subjects)
		}
	}
	if crb.RoleRef.Name != cr.Name || rb.RoleRef.Name != role.Name {
		t.Errorf("bindings refer to %s and %s", crb.RoleRef.Name, rb.RoleRef.Name)
	}
	vap := only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs)
	if vb := only[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs); vb.Spec.PolicyName != vap.Name {
		t.Errorf("the binding binds %s", vb.Spec.PolicyName)
	}
	if e := vap.Spec.Validations[0].Expression; !strings.Contains(e, "'"+ic.ContentKeySecret+"'") || !strings.Contains(e, "'"+ic.CertSecret+"'") {
		t.Errorf("the policy does not name the Secrets of the flags: %s", e)
	}
}
