package rollout

import (
	"os"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/hotreload/hotreload/controller"
)

// examples/controller/rollout.yaml as the controller sees it: a valid
// policy, and pods that take part in its rollout (opted in, the source
// and its stable copy mounted whole, the sidecar's report on its port).
func TestRolloutExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/controller/rollout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		r *ConfigRollout
		d *appsv1.Deployment
	)
	for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(b), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case Kind:
			r = &ConfigRollout{}
			if err := yaml.UnmarshalStrict([]byte(doc), r); err != nil {
				t.Fatal(err)
			}
		case "Deployment":
			d = &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict([]byte(doc), d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r == nil || d == nil {
		t.Fatal("no ConfigRollout or no Deployment")
	}
	if _, err := Parse(r.Spec); err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
	p.Namespace, p.Name, p.UID = "shop", "rollout-app-0", "uid"
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}
	tp, _ := controller.TrimPod(p)
	p = tp.(*corev1.Pod)
	key := controller.ObjectKey{Kind: controller.ConfigMap, Namespace: "shop", Name: r.Spec.Source.Name}
	m, ok := classify(p, key, map[types.UID]int{"uid": 10})
	if !ok || m.Refused != "" || !m.managed {
		t.Fatalf("the example's pod: member %v, refused %q", ok, m.Refused)
	}
	u, err := contentURL(p, "")
	if err != nil || u != "http://10.0.0.1:9533/-/content" {
		t.Errorf("report at %q, %v", u, err)
	}
	var args string
	for _, c := range d.Spec.Template.Spec.InitContainers {
		args += strings.Join(c.Args, " ")
	}
	if !strings.Contains(args, "--view=ref="+Ref(key)+",") || !strings.Contains(args, "stable=") {
		t.Errorf("the sidecar's args %q do not view %s with its stable copy", args, Ref(key))
	}
}
