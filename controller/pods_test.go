package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bigPod is a pod as a real cluster stores it: a last-applied annotation,
// managed fields, a long spec and status.
func bigPod() *corev1.Pod {
	p := newPod("big", mountConfigMap("app"), mountSecret("tls"), mountProjected([]string{"extra"}, []string{"token"}))
	p.Labels = map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6d"}
	p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = strings.Repeat(`{"spec":{"containers":[]}}`, 100)
	p.Annotations["prometheus.io/scrape"] = "true"
	p.Annotations[AnnotationNudged] = "configmap/app@7"
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(strings.Repeat(`{"f:spec":{}}`, 200))}}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	for i := range 3 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "registry.example/app:v1", Args: []string{"--config", "/etc/app"},
			Env:       []corev1.EnvVar{{Name: "A", Value: strings.Repeat("x", 200)}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		})
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: strings.Repeat("m", 100)}}
	p.Status.PodIP = "10.0.0.7"
	return p
}

func TestTrimPodKeepsMemorySmall(t *testing.T) {
	p := bigPod()
	out, err := TrimPod(p.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	tp := out.(*corev1.Pod)
	before, after := p.Size(), tp.Size()
	t.Logf("pod: %d bytes as protobuf, %d trimmed", before, after)
	if after*10 > before {
		t.Errorf("trimmed pod is %d bytes, want under a tenth of %d", after, before)
	}
	if tp.Name != p.Name || tp.Namespace != p.Namespace || tp.UID != p.UID || tp.ResourceVersion != p.ResourceVersion ||
		tp.Status.Phase != p.Status.Phase || tp.DeletionTimestamp != p.DeletionTimestamp {
		t.Errorf("trimmed pod lost its identity or state: %+v", tp.ObjectMeta)
	}
	wantAnn := map[string]string{AnnotationNudge: "true", AnnotationNudged: "configmap/app@7"}
	if fmt.Sprint(tp.Annotations) != fmt.Sprint(wantAnn) {
		t.Errorf("annotations = %v, want only hotreload.dev/ ones: %v", tp.Annotations, wantAnn)
	}
	if tp.Labels != nil || tp.ManagedFields != nil || tp.Spec.Containers != nil || tp.Status.Conditions != nil || tp.Status.PodIP != "" {
		t.Errorf("trimmed pod kept more than it needs: %+v", tp)
	}
	if got, want := fmt.Sprint(Mounts(tp)), fmt.Sprint(Mounts(p)); got != want {
		t.Errorf("mounts of the trimmed pod = %s, want %s", got, want)
	}
	// Idempotent, as client-go asks of a transform.
	again, _ := TrimPod(tp.DeepCopy())
	if again.(*corev1.Pod).Size() != after {
		t.Error("trimming twice changed the pod")
	}
	if other, _ := TrimPod("not a pod"); other != "not a pod" {
		t.Errorf("TrimPod changed a value that is not a pod: %v", other)
	}
}

func TestTrimObjectDropsWhatMayHoldSecretData(t *testing.T) {
	o := objectMeta(Secret, "tls", "42")
	o.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"tls.key":"c2VjcmV0"}}`}
	o.Labels = map[string]string{"a": "b"}
	o.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := TrimObject(o)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.Annotations != nil || m.Labels != nil || m.ManagedFields != nil {
		t.Errorf("trimmed object kept %v %v %v", m.Annotations, m.Labels, m.ManagedFields)
	}
	if m.Name != "tls" || m.Namespace != ns || m.ResourceVersion != "42" || m.UID != o.UID || m.Kind != "Secret" {
		t.Errorf("trimmed object lost its identity: %+v", m)
	}
}

func TestMounts(t *testing.T) {
	p := newPod("p", mountConfigMap("a"), mountSecret("s"), mountProjected([]string{"a", "b"}, []string{"s", "t"}),
		func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}})
		})
	var got []string
	for _, k := range Mounts(p) {
		got = append(got, k.String())
	}
	want := []string{"default/configmap/a", "default/secret/s", "default/configmap/b", "default/secret/t"}
	if !slices.Equal(got, want) {
		t.Errorf("Mounts = %q, want %q (each once)", got, want)
	}
}

func TestParseNudge(t *testing.T) {
	tests := []struct {
		in       string
		kind     Kind
		name, rv string
		wantErr  bool
	}{
		{"configmap/app@123", ConfigMap, "app", "123", false},
		{"secret/tls@9", Secret, "tls", "9", false},
		{"configmap/a@b@7", ConfigMap, "a@b", "7", false},
		{"", "", "", "", true},
		{"pod/x@1", "", "", "", true},
		{"configmap/app", "", "", "", true},
		{"configmap/@1", "", "", "", true},
		{"configmap/app@", "", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			kind, name, rv, err := ParseNudge(tt.in)
			if (err != nil) != tt.wantErr || kind != tt.kind || name != tt.name || rv != tt.rv {
				t.Errorf("ParseNudge(%q) = %q, %q, %q, %v", tt.in, kind, name, rv, err)
			}
			if err == nil {
				if back := (ObjectKey{kind, ns, name}).Nudge(rv); back != tt.in {
					t.Errorf("Nudge gives %q back, want %q", back, tt.in)
				}
			}
		})
	}
}

func TestNewer(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"10", "9", true},
		{"9", "10", false},
		{"10", "10", false},
		{"1", "", true},
		{"", "1", false},
		{"", "", false},
		{"abc", "abd", true}, // not the API server's: any difference counts
		{"abc", "abc", false},
	}
	for _, tt := range tests {
		if got := newer(tt.a, tt.b); got != tt.want {
			t.Errorf("newer(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestNudgeable(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running and opted in", newPod("p"), true},
		{"not opted in", newPod("p", notOptedIn), false},
		{"opted in with another value", newPod("p", func(p *corev1.Pod) { p.Annotations[AnnotationNudge] = "yes" }), false},
		{"pending", newPod("p", phase(corev1.PodPending)), false},
		{"failed", newPod("p", phase(corev1.PodFailed)), false},
		{"being deleted", newPod("p", deleting), false},
	}
	for _, tt := range tests {
		if got := nudgeable(tt.pod); got != tt.want {
			t.Errorf("%s: nudgeable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
