package controller_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotreload/hotreload/controller"
)

func ExampleMounts() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
			{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "web-tls"}}},
			}}}},
		}},
	}
	for _, k := range controller.Mounts(pod) {
		fmt.Println(k, "->", controller.AnnotationNudged+":", k.Nudge("81234"))
	}
	// Output:
	// shop/configmap/web-config -> hotreload.dev/nudged: configmap/web-config@81234
	// shop/secret/web-tls -> hotreload.dev/nudged: secret/web-tls@81234
}

func ExampleParseNudge() {
	kind, name, rv, err := controller.ParseNudge("secret/web-tls@81240")
	fmt.Println(kind, name, rv, err)
	// Output: secret web-tls 81240 <nil>
}

func ExampleTrimPod() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", Annotations: map[string]string{
			controller.AnnotationNudge:                         "true",
			"kubectl.kubernetes.io/last-applied-configuration": `{"a":"large","document":"..."}`,
		}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
	obj, _ := controller.TrimPod(pod)
	t := obj.(*corev1.Pod)
	fmt.Println(t.Name, t.Status.Phase, t.Annotations, len(t.Spec.Containers), t.Spec.Volumes[0].ConfigMap.Name, t.Status.PodIP == "")
	// Output: web-0 Running map[hotreload.dev/nudge:true] 0 web-config true
}
