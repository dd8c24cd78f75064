package charts_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotreload/hotreload/controller/injector"
	"github.com/hotreload/hotreload/test/support/manifest"
)

const injectorName = "hotreload-injector"

// webhookOf finds the one MutatingWebhookConfiguration of a render.
func webhookOf(t *testing.T, objs []manifest.Object) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	whs := manifest.All[*admissionregistrationv1.MutatingWebhookConfiguration](objs)
	if len(whs) != 1 || len(whs[0].Webhooks) != 1 {
		t.Fatalf("%d webhook configurations, want 1 with 1 webhook", len(whs))
	}
	return whs[0]
}

// The injector (injector.enabled): the controller serves it with the
// names the chart gives its objects, the API server reaches it through the
// Service, the webhook configuration is the one examples/injector ships,
// and RBAC grants what docs/injector.md lists, nothing more.
func TestInjector(t *testing.T) {
	if objs := render(t); len(manifest.All[*admissionregistrationv1.MutatingWebhookConfiguration](objs)) != 0 {
		t.Fatal("a webhook configuration without injector.enabled")
	}
	objs := render(t, "--set", "injector.enabled=true")
	d, c := controllerContainer(t, objs)
	cfg, err := parseArgs(t, c)
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	ic := cfg.Injector
	wh := webhookOf(t, objs)
	svc := manifest.Find[*corev1.Service](t, objs, name)
	if !ic.Enabled || ic.Certs != "self" || ic.Webhook != wh.Name || ic.Service != svc.Name || ic.Namespace != namespace ||
		ic.CertSecret != injectorName+"-tls" || ic.Image != "ghcr.io/hotreload/hotreload:v0.1.0" || ic.NativeSidecars != "auto" || ic.ContentKey != "create" {
		t.Errorf("injector flags %+v", ic)
	}
	// The Service's webhook port leads to the container's, where it listens.
	var webhookPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == "webhook" {
			webhookPort = &svc.Spec.Ports[i]
		}
	}
	cp := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" })
	if webhookPort == nil || webhookPort.Port != 443 || webhookPort.TargetPort.String() != "webhook" || cp < 0 || ic.ListenAddress != fmt.Sprintf(":%d", c.Ports[cp].ContainerPort) {
		t.Errorf("Service port %+v, container ports %+v, listen %s", webhookPort, c.Ports, ic.ListenAddress)
	}
	if !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
		t.Error("the Service does not select the controller's pods")
	}
	w := wh.Webhooks[0]
	if ref := w.ClientConfig.Service; ref == nil || ref.Name != svc.Name || ref.Namespace != namespace || *ref.Path != "/inject" || *ref.Port != 443 {
		t.Errorf("client config %+v", w.ClientConfig)
	}

	// The same webhook as examples/injector's, but for the Service.
	ex, err := os.ReadFile("../examples/injector/injector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exObjs, err := manifest.DecodeAll(ex)
	if err != nil {
		t.Fatal(err)
	}
	exW := webhookOf(t, exObjs).Webhooks[0]
	exW.ClientConfig.Service.Name = svc.Name
	if !equality.Semantic.DeepEqual(w, exW) {
		t.Errorf("webhook\n%+v\nexamples/injector's\n%+v", w, exW)
	}

	// RBAC: the webhook configuration by name; the content key by name and
	// create; Events; the certificate's Secret by name.
	cr := manifest.Find[*rbacv1.ClusterRole](t, objs, name+"-injector")
	wantCluster := []string{
		"[admissionregistration.k8s.io] [mutatingwebhookconfigurations] [" + wh.Name + "] [get list watch update]",
		"[] [secrets] [" + ic.ContentKeySecret + "] [get]",
		"[] [secrets] [] [create]",
		"[] [events] [] [create patch]",
	}
	if got := rules(cr.Rules); !slices.Equal(got, wantCluster) {
		t.Errorf("ClusterRole rules %q, want %q", got, wantCluster)
	}
	role := manifest.Find[*rbacv1.Role](t, objs, name+"-injector-certificates")
	if got, want := rules(role.Rules), []string{"[] [secrets] [" + ic.CertSecret + "] [get list watch update]", "[] [secrets] [] [create]"}; !slices.Equal(got, want) {
		t.Errorf("certificate Role rules %q, want %q", got, want)
	}
	sa := manifest.Find[*corev1.ServiceAccount](t, objs, name)
	crb := manifest.Find[*rbacv1.ClusterRoleBinding](t, objs, name+"-injector")
	rb := manifest.Find[*rbacv1.RoleBinding](t, objs, name+"-injector-certificates")
	checkBinding(t, "ClusterRoleBinding", crb.RoleRef, crb.Subjects, "ClusterRole/"+cr.Name, sa)
	checkBinding(t, "RoleBinding", rb.RoleRef, rb.Subjects, "Role/"+role.Name, sa)
	vap := manifest.Find[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, injectorName+"-secrets")
	if e := vap.Spec.Validations[0].Expression; !strings.Contains(e, "'"+ic.ContentKeySecret+"'") || !strings.Contains(e, "'"+ic.CertSecret+"'") ||
		!strings.Contains(vap.Spec.MatchConditions[0].Expression, "system:serviceaccount:"+namespace+":"+sa.Name) {
		t.Errorf("the secrets policy does not name the Secrets and the token: %s", e)
	}
	if b := manifest.Find[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs, injectorName+"-secrets"); b.Spec.PolicyName != vap.Name {
		t.Errorf("binding of %s", b.Spec.PolicyName)
	}
	// Below 1.30 no policy, below 1.28 no match condition.
	old := render(t, "--set", "injector.enabled=true", "--kube-version", "1.27.0")
	if len(manifest.All[*admissionregistrationv1.ValidatingAdmissionPolicy](old)) != 0 || len(webhookOf(t, old).Webhooks[0].MatchConditions) != 0 {
		t.Error("Kubernetes 1.27 gets a ValidatingAdmissionPolicy or a matchCondition")
	}
}

// Every non-default value of the injector lands where it should.
func TestInjectorValues(t *testing.T) {
	objs := render(t, "-f", "hotreload/ci/everything-values.yaml")
	_, c := controllerContainer(t, objs)
	cfg, err := parseArgs(t, c)
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	ic := cfg.Injector
	if ic.ListenAddress != ":9443" || !strings.HasSuffix(ic.Image, "hotreload@sha256:1111111111111111111111111111111111111111111111111111111111111111") ||
		ic.ImagePullPolicy != "IfNotPresent" || ic.NativeSidecars != "true" || ic.ContentKey != "existing" || !slices.Equal(ic.ExcludeNamespaces, []string{"sandbox"}) ||
		ic.CertValidity.String() != "168h0m0s" || ic.CAValidity.String() != "2160h0m0s" || ic.CertOverlap.String() != "5m0s" {
		t.Errorf("injector flags %+v", ic)
	}
	w := webhookOf(t, objs).Webhooks[0]
	if w.TimeoutSeconds == nil || *w.TimeoutSeconds != 10 || w.ObjectSelector == nil || len(w.ObjectSelector.MatchExpressions) != 1 {
		t.Errorf("webhook %+v", w)
	}
	sel := w.NamespaceSelector
	want := []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a"}},
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", namespace, "sandbox"}},
	}
	if sel.MatchLabels["hotreload.dev/inject"] != "true" || !equality.Semantic.DeepEqual(sel.MatchExpressions, want) {
		t.Errorf("namespaceSelector %+v", sel)
	}
	// The namespaced install: the content key and Events in team-a only,
	// the webhook configuration cluster-wide; existing keys are never
	// created.
	role := manifest.Find[*rbacv1.Role](t, objs, name+"-injector")
	if role.Namespace != "team-a" || !slices.Equal(rules(role.Rules), []string{"[] [secrets] [hotreload-content-key] [get]", "[] [events] [] [create patch]"}) {
		t.Errorf("Role in %s: %q", role.Namespace, rules(role.Rules))
	}
	cr := manifest.Find[*rbacv1.ClusterRole](t, objs, name+"-injector")
	if got := rules(cr.Rules); len(got) != 1 || !strings.Contains(got[0], "mutatingwebhookconfigurations") {
		t.Errorf("ClusterRole rules %q: want the webhook configuration alone", got)
	}
}

// With cert-manager the chart makes a self-signed CA, an Issuer and the
// serving Certificate for the Service, cert-manager's CA injector writes the
// caBundle, and the controller only reads the Secret.
func TestInjectorCertManager(t *testing.T) {
	objs := render(t, "--set", "injector.enabled=true,injector.certs.source=cert-manager")
	_, c := controllerContainer(t, objs)
	cfg, err := parseArgs(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Injector.Certs != "external" {
		t.Errorf("--injector.certs=%s", cfg.Injector.Certs)
	}
	wh := webhookOf(t, objs)
	if wh.Annotations["cert-manager.io/inject-ca-from"] != namespace+"/"+injectorName {
		t.Errorf("annotations %v", wh.Annotations)
	}
	var cert struct {
		Spec struct {
			SecretName string            `json:"secretName"`
			DNSNames   []string          `json:"dnsNames"`
			IssuerRef  map[string]string `json:"issuerRef"`
		} `json:"spec"`
	}
	var certs, issuers int
	for _, o := range manifest.Kind(objs, "Certificate") {
		certs++
		if o.Name == injectorName {
			remarshal(t, o.Map, &cert)
		}
	}
	issuers = len(manifest.Kind(objs, "Issuer"))
	if certs != 2 || issuers != 2 || cert.Spec.SecretName != cfg.Injector.CertSecret || cert.Spec.IssuerRef["name"] != injectorName+"-ca" {
		t.Errorf("%d Certificates, %d Issuers, serving %+v", certs, issuers, cert.Spec)
	}
	if !slices.Contains(cert.Spec.DNSNames, injector.DNSNames(cfg.Injector.Service, namespace)[0]) {
		t.Errorf("dnsNames %q lack the name the API server dials", cert.Spec.DNSNames)
	}
	role := manifest.Find[*rbacv1.Role](t, objs, name+"-injector-certificates")
	if got := rules(role.Rules); !slices.Equal(got, []string{"[] [secrets] [" + cfg.Injector.CertSecret + "] [get list watch]"}) {
		t.Errorf("certificate Role rules %q: read only", got)
	}
	for _, r := range manifest.Find[*rbacv1.ClusterRole](t, objs, name+"-injector").Rules {
		if slices.Contains(r.Resources, "mutatingwebhookconfigurations") {
			t.Error("the controller may update the webhook configuration, which cert-manager keeps")
		}
	}
	// An issuer of the user's: no CA of the chart's.
	objs = render(t, "--set", "injector.enabled=true,injector.certs.source=cert-manager,injector.certs.issuerRef.name=corp,injector.certs.issuerRef.kind=ClusterIssuer")
	if n := len(manifest.Kind(objs, "Issuer")); n != 0 || len(manifest.Kind(objs, "Certificate")) != 1 {
		t.Errorf("%d Issuers with an issuer given", n)
	}
}
