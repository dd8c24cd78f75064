package injector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// testInjector is an Injector of fake clients, its recorder of Events and
// its registry.
type testInjector struct {
	*Injector
	client *fake.Clientset
	events *record.FakeRecorder
	reg    *prometheus.Registry
	now    time.Time
}

func newTestInjector(t *testing.T, native bool, objects ...runtime.Object) *testInjector {
	t.Helper()
	client := fake.NewClientset(objects...)
	ti := &testInjector{client: client, events: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(), now: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}
	nativeMode := NativeFalse
	if native {
		nativeMode = NativeTrue
	}
	inj, err := New(testLogger(t), ti.reg, Options{
		Sidecar:        Sidecar{Image: testImage},
		NativeSidecars: nativeMode,
		Namespace:      "hotreload-system",
		Certs:          CertsSelf,
		CertSecret:     "hotreload-injector-tls",
		Webhook:        "hotreload-injector",
		Service:        "hotreload-injector",
		Secrets:        noWatchList{client.CoreV1()},
		Webhooks:       noWatchList{client.AdmissionregistrationV1()},
		Now:            func() time.Time { return ti.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	inj.webhook.events = ti.events
	inj.missed.events = ti.events
	ti.Injector = inj
	return ti
}

// admit sends the pod to the webhook over HTTP as the API server does, and
// returns the response and the pod as admitted.
func (ti *testInjector) admit(t *testing.T, p *corev1.Pod, dryRun bool) (*admissionv1.AdmissionResponse, *corev1.Pod) {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("req-1"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: p.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
			DryRun:    ptr.To(dryRun),
		},
	}
	body, _ := json.Marshal(review)
	rec := httptest.NewRecorder()
	ti.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/inject", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	resp := out.Response
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || resp == nil || resp.UID != "req-1" || !resp.Allowed {
		t.Fatalf("review %+v: want an allowed response to req-1", out)
	}
	if resp.Patch == nil {
		return resp, p
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v", resp.PatchType)
	}
	var ops []Op
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	return resp, applyPatch(t, p, ops)
}

func (ti *testInjector) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-ti.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func injections(ti *testInjector, result string) float64 {
	return testutil.ToFloat64(ti.m.injections.WithLabelValues(result))
}

func TestWebhookInjects(t *testing.T) {
	ti := newTestInjector(t, true)
	resp, got := ti.admit(t, podOf(reloadURL()), false)
	c, native := sidecar(t, got)
	if !native || len(resp.Warnings) != 0 {
		t.Errorf("native %v, warnings %q", native, resp.Warnings)
	}
	if cfg := parseSidecar(t, c); cfg.ContentKeyFile == "" {
		t.Error("no content key")
	}
	// The content key Secret was made in the pod's namespace, 32 random
	// bytes that the sidecar takes.
	s, err := ti.client.CoreV1().Secrets("shop").Get(context.Background(), "hotreload-content-key", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(s.Data[KeySecretKey])) < 32 || s.Type != corev1.SecretTypeOpaque {
		t.Errorf("content key %d bytes, type %s", len(s.Data[KeySecretKey]), s.Type)
	}
	if injections(ti, ResultInjected) != 1 || len(ti.drainEvents()) != 0 {
		t.Error("not counted as injected, or an Event")
	}
	// A second pod uses the same key, and a pod that has the sidecar gets
	// only the mark.
	_, _ = ti.admit(t, podOf(reloadURL()), false)
	resp, again := ti.admit(t, got, false)
	if len(again.Spec.InitContainers) != 1 || again.Annotations[AnnotationInjected] != ResultPresent {
		t.Errorf("init containers %d, mark %q: want the sidecar once, marked present", len(again.Spec.InitContainers), again.Annotations[AnnotationInjected])
	}
	if injections(ti, ResultInjected) != 2 || injections(ti, ResultPresent) != 1 || len(resp.Warnings) != 0 {
		t.Errorf("injected %v, present %v", injections(ti, ResultInjected), injections(ti, ResultPresent))
	}
	creates := 0
	for _, a := range ti.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "secrets" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("%d creates of the content key, want 1", creates)
	}
}

func TestWebhookClassic(t *testing.T) {
	ti := newTestInjector(t, false)
	_, got := ti.admit(t, podOf(reloadURL()), false)
	if _, native := sidecar(t, got); native {
		t.Error("native sidecar with native sidecars off")
	}
}

func TestWebhookLeavesAlone(t *testing.T) {
	hand := podOf(reloadURL(), func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "reloader", Image: "ghcr.io/hotreload/hotreload:v0.1.0", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	})
	tests := []struct {
		name    string
		pod     *corev1.Pod
		result  string
		warning string
	}{
		{"not opted in", podOf(nil), "", ""},
		{"only the nudge", podOf(map[string]string{AnnotationNudge: "true"}), "", ""},
		{"opted out", podOf(map[string]string{AnnotationRestart: "false"}), "", ""},
		{"kube-system", podOf(reloadURL(), func(p *corev1.Pod) { p.Namespace = "kube-system" }), ResultExcluded, "never adds its sidecar in namespace kube-system"},
		{"its own namespace", podOf(reloadURL(), func(p *corev1.Pod) { p.Namespace = "hotreload-system" }), ResultExcluded, "in namespace hotreload-system"},
		{"a typo", podOf(map[string]string{"hotreload.dev/reload-uri": "http://x/"}), "", "hotreload.dev/reload-uri: not an annotation of hotreload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ti := newTestInjector(t, true)
			resp, got := ti.admit(t, tt.pod, false)
			if resp.Patch != nil || len(got.Spec.InitContainers) != 0 || len(got.Spec.Containers) != 1 {
				t.Errorf("patched: %s", resp.Patch)
			}
			if w := strings.Join(resp.Warnings, "\n"); (tt.warning == "") != (w == "") || !strings.Contains(w, tt.warning) {
				t.Errorf("warnings %q, want %q", resp.Warnings, tt.warning)
			}
			if tt.result != "" && injections(ti, tt.result) != 1 {
				t.Errorf("not counted as %s", tt.result)
			}
		})
	}
	t.Run("a sidecar of its own in the init containers", func(t *testing.T) {
		ti := newTestInjector(t, true)
		_, got := ti.admit(t, hand, false)
		if len(got.Spec.InitContainers) != 1 || got.Spec.InitContainers[0].Name != "reloader" || got.Annotations[AnnotationInjected] != ResultPresent {
			t.Errorf("init containers %s, mark %q", containerNames(got.Spec.InitContainers), got.Annotations[AnnotationInjected])
		}
	})
}

// A pod whose annotations do not parse, or do not suit it, is admitted
// unchanged with a warning per problem and an Event on its owner.
func TestWebhookBadAnnotations(t *testing.T) {
	owner := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-5d8f", UID: "rs-uid", Controller: ptr.To(true)}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		warnings []string
		event    string
	}{
		{"a URL without a scheme and a bad signal", podOf(map[string]string{AnnotationReloadURL: "localhost:9090", AnnotationSignal: "SIGNOPE", AnnotationProcessName: "x"}, owner),
			[]string{`hotreload: hotreload.dev/reload-url "localhost:9090": want an http or https URL`, `hotreload: hotreload.dev/signal "SIGNOPE": unknown signal`},
			"Warning HotreloadNotInjected pod app-* admitted without the hotreload sidecar: hotreload.dev/reload-url"},
		{"a signal to an app of unknown user", podOf(map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "nginx"}, owner),
			[]string{"hotreload: hotreload.dev/signal: container app sets no runAsUser (its image decides), so which user may signal it is unknown"},
			"Warning HotreloadNotInjected pod app-* admitted without the hotreload sidecar: hotreload.dev/signal: container app sets no runAsUser"},
		{"a named pod without an owner", podOf(map[string]string{AnnotationReloadURL: "http://x/", AnnotationVolumes: "nope"}, func(p *corev1.Pod) { p.Name = "solo" }),
			[]string{`hotreload: hotreload.dev/volumes: the pod has no volume "nope"`}, "Warning HotreloadNotInjected pod solo admitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ti := newTestInjector(t, true)
			resp, got := ti.admit(t, tt.pod, false)
			if resp.Patch != nil || len(got.Spec.InitContainers) != 0 {
				t.Errorf("patched: %s", resp.Patch)
			}
			if len(resp.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings %q, want %q", resp.Warnings, tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.HasPrefix(resp.Warnings[i], w) || len(resp.Warnings[i]) > maxWarning {
					t.Errorf("warning %q (%d characters), want %q... within %d", resp.Warnings[i], len(resp.Warnings[i]), w, maxWarning)
				}
			}
			events := ti.drainEvents()
			if len(events) != 1 || !strings.HasPrefix(events[0], tt.event) {
				t.Errorf("events %q, want one %q...", events, tt.event)
			}
			if injections(ti, ResultInvalid) != 1 {
				t.Error("not counted as invalid")
			}
			for _, a := range ti.client.Actions() {
				if a.GetResource().Resource == "secrets" {
					t.Errorf("%s secrets for a pod that gets no sidecar", a.GetVerb())
				}
			}
			// A dry run warns the same, and makes no Event.
			resp, _ = ti.admit(t, tt.pod, true)
			if len(resp.Warnings) != len(tt.warnings) || len(ti.drainEvents()) != 0 {
				t.Errorf("dry run: warnings %q, an Event", resp.Warnings)
			}
		})
	}
}

// Every warning and error fits what the API server passes on whole, even
// with the longest names.
func TestWarningsFit(t *testing.T) {
	long := strings.Repeat("v", 63)
	longPath := "/" + strings.Repeat("p", 100)
	sig := map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "nginx", AnnotationContainer: long}
	longPod := func(p *corev1.Pod) {
		p.Spec.Containers[0].Name = long
		p.Spec.Volumes[0].Name = long
		p.Spec.Containers[0].VolumeMounts[0] = corev1.VolumeMount{Name: long, MountPath: longPath}
	}
	var msgs []string
	for _, p := range []*corev1.Pod{
		podOf(sig, longPod),
		podOf(map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "nginx", AnnotationContainer: long, AnnotationRunAsUser: "1"}, longPod, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](2)}
			p.Spec.Containers[0].VolumeMounts[0].SubPath = "x"
		}),
		podOf(map[string]string{AnnotationRestart: "true", AnnotationProcessName: "x", AnnotationContainer: long, AnnotationVolumes: long}, longPod, appUID(1), func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](1)
			p.Spec.Volumes[0].ConfigMap.Items = []corev1.KeyToPath{{Key: "a", Path: "a"}}
			p.Spec.Volumes[0].ConfigMap.Name = strings.Repeat("n", 253)
		}),
		podOf(map[string]string{AnnotationReloadURL: "http://x/", AnnotationRollout: "true"}, longPod, func(p *corev1.Pod) {
			p.Spec.Volumes[0].ConfigMap.Name = strings.Repeat("n", 63)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: long + "2", VolumeSource: p.Spec.Volumes[0].VolumeSource})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: long + "2", MountPath: "/x"})
		}),
		podOf(map[string]string{AnnotationReloadURL: "http://x/", AnnotationRollout: "true"}, longPod, withVolume(corev1.Volume{Name: long + "x", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: long, DefaultMode: ptr.To[int32](0o400)}}}, longPath+"/x")),
	} {
		req, warnings, err := ParseAnnotations(p.Annotations)
		msgs = append(msgs, warnings...)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Mutate(p, req, Sidecar{Image: testImage})
		msgs = append(msgs, res.Warnings...)
		if err != nil {
			msgs = append(msgs, strings.Split(err.Error(), "\n")...)
		}
	}
	_, _, err := ParseAnnotations(map[string]string{AnnotationReloadURL: "localhost:" + strings.Repeat("9", 100), AnnotationSignal: strings.Repeat("S", 60), AnnotationRollout: "maybe", AnnotationRunAsUser: "x"})
	msgs = append(msgs, strings.Split(err.Error(), "\n")...)
	for _, m := range msgs {
		if len("hotreload: "+m) > maxWarning {
			t.Errorf("%d characters: %q", len("hotreload: "+m), m)
		}
	}
	if len(msgs) < 10 {
		t.Errorf("only %d messages: %q", len(msgs), msgs)
	}
}

func TestWebhookDryRunCreatesNoKey(t *testing.T) {
	ti := newTestInjector(t, true)
	_, got := ti.admit(t, podOf(reloadURL()), true)
	c, _ := sidecar(t, got)
	if parseSidecar(t, c).ContentKeyFile == "" {
		t.Error("a dry run answers differently from a real request")
	}
	if _, err := ti.client.CoreV1().Secrets("shop").Get(context.Background(), "hotreload-content-key", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a dry run created the content key: %v", err)
	}
}

// A key that cannot be made (RBAC) leaves the sidecar without it, and the
// pod is injected all the same.
func TestWebhookWithoutKey(t *testing.T) {
	ti := newTestInjector(t, true)
	ti.client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "hotreload-content-key", errors.New("RBAC"))
	})
	_, got := ti.admit(t, podOf(reloadURL()), false)
	c, _ := sidecar(t, got)
	if cfg := parseSidecar(t, c); cfg.ContentKeyFile != "" {
		t.Error("a content key that does not exist is mounted")
	}
	// existing: mounted where it exists, never created.
	ti = newTestInjector(t, true)
	ti.webhook.keys.mode = KeyExisting
	_, got = ti.admit(t, podOf(reloadURL()), false)
	if c, _ := sidecar(t, got); parseSidecar(t, c).ContentKeyFile != "" {
		t.Error("mode existing mounts a key that does not exist")
	}
	ti = newTestInjector(t, true, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hotreload-content-key", Namespace: "shop"}})
	ti.webhook.keys.mode = KeyExisting
	_, got = ti.admit(t, podOf(reloadURL()), false)
	if c, _ := sidecar(t, got); parseSidecar(t, c).ContentKeyFile == "" {
		t.Error("mode existing does not mount the key that exists")
	}
}

func TestWebhookRefusesBadRequests(t *testing.T) {
	ti := newTestInjector(t, true)
	for _, tt := range []struct {
		method, body string
		want         int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPost, "{", http.StatusBadRequest},
		{http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		ti.Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, "/inject", strings.NewReader(tt.body)))
		if rec.Code != tt.want {
			t.Errorf("%s %q: %d, want %d", tt.method, tt.body, rec.Code, tt.want)
		}
	}
}

// noWatchList tells the reflector that the fake typed client it wraps sends
// no initial events, as the fake clientset tells it of itself.
type noWatchList struct{ any }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func (n noWatchList) Secrets(ns string) corev1client.SecretInterface {
	return n.any.(corev1client.SecretsGetter).Secrets(ns)
}

func (n noWatchList) MutatingWebhookConfigurations() admissionregistrationv1client.MutatingWebhookConfigurationInterface {
	return n.any.(admissionregistrationv1client.MutatingWebhookConfigurationsGetter).MutatingWebhookConfigurations()
}

func testLogger(t *testing.T) log.Logger {
	return log.LoggerFunc(func(kv ...any) error {
		t.Log(kv...)
		return nil
	})
}

// run runs what the controller would of the injector: its informers, Run,
// and Lead as if this replica led, until the test ends.
func (ti *testInjector) run(t *testing.T, lead bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, inf := range ti.Informers() {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	wg.Go(func() { _ = ti.Run(ctx) })
	if lead {
		wg.Go(func() { ti.Lead(ctx) })
	}
}
