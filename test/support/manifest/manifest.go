// Package manifest renders the Kubernetes objects a user installs (the Helm
// chart with helm, the kustomize base with kubectl kustomize) and decodes
// them for tests: strictly into the API's Go types where this module has
// them, as the API server would (an unknown or misplaced field fails), and
// as plain maps for the rest (the Prometheus Operator's kinds). Test
// support only: nothing that ships imports it.
package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/hotreload/hotreload/test/support/e2etest"
)

// Object is one rendered document.
type Object struct {
	APIVersion, Kind, Name, Namespace string
	Labels                            map[string]string
	// Typed is a pointer to the API type (*appsv1.Deployment, ...), or nil
	// for a kind this module has no Go type for.
	Typed any
	// Map is the whole document as YAML decodes it.
	Map map[string]any
}

// Key is kind/namespace/name, unique among a release's objects.
func (o Object) Key() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

var kinds = map[string]func() any{
	"v1/ServiceAccount":                               func() any { return new(corev1.ServiceAccount) },
	"v1/Service":                                      func() any { return new(corev1.Service) },
	"v1/ConfigMap":                                    func() any { return new(corev1.ConfigMap) },
	"v1/Namespace":                                    func() any { return new(corev1.Namespace) },
	"apps/v1/Deployment":                              func() any { return new(appsv1.Deployment) },
	"policy/v1/PodDisruptionBudget":                   func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":              func() any { return new(networkingv1.NetworkPolicy) },
	"rbac.authorization.k8s.io/v1/ClusterRole":        func() any { return new(rbacv1.ClusterRole) },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() any { return new(rbacv1.ClusterRoleBinding) },
	"rbac.authorization.k8s.io/v1/Role":               func() any { return new(rbacv1.Role) },
	"rbac.authorization.k8s.io/v1/RoleBinding":        func() any { return new(rbacv1.RoleBinding) },
	"admissionregistration.k8s.io/v1/MutatingWebhookConfiguration": func() any {
		return new(admissionregistrationv1.MutatingWebhookConfiguration)
	},
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": func() any {
		return new(admissionregistrationv1.ValidatingAdmissionPolicy)
	},
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": func() any {
		return new(admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	},
}

// Untyped kinds are decoded as maps only; any other kind is an error, so a
// template that renders something unexpected fails the test.
var untyped = map[string]bool{
	"monitoring.coreos.com/v1/ServiceMonitor":          true,
	"monitoring.coreos.com/v1/PodMonitor":              true,
	"monitoring.coreos.com/v1/PrometheusRule":          true,
	"apiextensions.k8s.io/v1/CustomResourceDefinition": true,
	"cert-manager.io/v1/Certificate":                   true,
	"cert-manager.io/v1/Issuer":                        true,
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Split splits a multi-document YAML stream, dropping documents that hold
// only comments and blank lines.
func Split(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range separator.Split(string(data), -1) {
		for _, line := range strings.Split(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				docs = append(docs, []byte(d))
				break
			}
		}
	}
	return docs
}

// Decode decodes one document.
func Decode(doc []byte) (Object, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return Object{}, err
	}
	var o Object
	if err := yaml.Unmarshal(j, &o.Map); err != nil {
		return Object{}, err
	}
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(j, &head); err != nil {
		return Object{}, err
	}
	o.APIVersion, o.Kind = head.APIVersion, head.Kind
	o.Name, o.Namespace, o.Labels = head.Metadata.Name, head.Metadata.Namespace, head.Metadata.Labels
	key := o.APIVersion + "/" + o.Kind
	if newObj, ok := kinds[key]; ok {
		o.Typed = newObj()
		strict, err := sigsjson.UnmarshalStrict(j, o.Typed)
		if err == nil {
			err = errors.Join(strict...)
		}
		if err != nil {
			return Object{}, fmt.Errorf("%s %s: %w", key, o.Name, err)
		}
	} else if !untyped[key] {
		return Object{}, fmt.Errorf("unexpected kind %s (%s)", key, o.Name)
	}
	if o.Name == "" {
		return Object{}, fmt.Errorf("%s without a name", key)
	}
	return o, nil
}

// DecodeAll decodes every document of a stream; keys must be unique.
func DecodeAll(data []byte) ([]Object, error) {
	var objs []Object
	seen := map[string]bool{}
	for i, d := range Split(data) {
		o, err := Decode(d)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if seen[o.Key()] {
			return nil, fmt.Errorf("document %d: %s twice", i+1, o.Key())
		}
		seen[o.Key()] = true
		objs = append(objs, o)
	}
	return objs, nil
}

// Find returns the one object of type T named name, failing the test
// when there is none or several.
func Find[T any](tb testing.TB, objs []Object, name string) T {
	tb.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.Typed.(T); ok && o.Name == name {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		tb.Fatalf("%d objects of type %T named %q, want 1", len(found), zero, name)
	}
	return found[0]
}

// All returns the objects of type T.
func All[T any](objs []Object) []T {
	var found []T
	for _, o := range objs {
		if v, ok := o.Typed.(T); ok {
			found = append(found, v)
		}
	}
	return found
}

// Kind returns the objects of a kind (for the untyped kinds).
func Kind(objs []Object, kind string) []Object {
	var found []Object
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	return found
}

// Helm is the helm binary the tests run: $HELM, else helm on PATH. Without
// one the test skips, or fails with CI=true (make chart-lint builds it into
// a cache outside the clone; make test puts that on PATH).
func Helm(tb testing.TB) string {
	tb.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := exec.LookPath("helm")
	if err != nil {
		e2etest.SkipOrFail(tb, "helm not found ($HELM or PATH): make chart-lint builds it")
	}
	return h
}

// Run runs a command for at most a minute and returns its stdout, or an
// error holding its stderr.
func Run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Template renders chart as release in namespace with helm template and the
// extra arguments (--set ..., -f ...), and returns the output.
func Template(tb testing.TB, chart, release, namespace string, args ...string) []byte {
	tb.Helper()
	out, err := Run(Helm(tb), append([]string{"template", release, chart, "--namespace", namespace}, args...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Kustomize renders dir with kubectl's built-in kustomize. Without kubectl
// the test skips, or fails with CI=true.
func Kustomize(tb testing.TB, dir string) []byte {
	tb.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		e2etest.SkipOrFail(tb, "kubectl not installed: the kustomize base is not rendered")
	}
	out, err := Run(kubectl, "kustomize", dir)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// HelmOnly are the labels Helm's templates add that mean nothing outside a
// Helm release: the kustomize base leaves them out.
var HelmOnly = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}

var helmLines = regexp.MustCompile(`(?m)^([ \t]+(helm\.sh/chart|app\.kubernetes\.io/managed-by): .*|# Source: .*)\n`)

// StripHelm removes from helm template's output the lines of the HelmOnly
// labels and the "# Source:" comments, and nothing else: the rest of the
// text, comments included, stays as the chart wrote it.
func StripHelm(out []byte) []byte {
	return helmLines.ReplaceAll(out, nil)
}
