//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotreload/hotreload/controller/injector"
	"github.com/hotreload/hotreload/test/support/manifest"
)

// The injector in the real cluster (issue #24, "Proof"): the chart
// installed with helm and injector.enabled, as the README says, the API
// server calling the webhook through the controller's Service and
// kube-proxy.
//
//   - a Deployment that adds one annotation and changes nothing else gets
//     the sidecar in its pods, and they reload on an edit;
//   - a pod with an annotation that does not parse is created unchanged,
//     with a warning to kubectl and an Event;
//   - with the injector's Service down (scaled to 0) pods still start, and
//     once it is back the missed injection is reported;
//   - certificates rotated while pods are being created fail no admission.
//
// Values beside the defaults: the webhook sees only the namespaces of this
// test (labelled), so that the suite's other pods never call it; and a
// certificate overlap of 10 s instead of 2 min, so that a CA rotation
// completes within the test. The images are the chart's, loaded under
// their shipped names.

const (
	injectorRelease = "inj"
	injectorNS      = "hotreload-inj"
	injectorLabel   = "e2e.hotreload.dev/injector"
	injectorCtl     = injectorRelease + "-hotreload-controller"
	injectorWebhook = injectorRelease + "-hotreload-injector"
	injectorSecret  = injectorWebhook + "-tls"
	certOverlap     = 10 * time.Second
)

// startInjector installs the chart with the injector and waits until both
// replicas serve a certificate that the webhook configuration trusts.
func startInjector(t *testing.T) []ctlReplica {
	t.Helper()
	helm := manifest.Helm(t)
	createNamespace(t, injectorNS)
	if out, err := manifest.Run(helm, "install", injectorRelease, chartDir, "--namespace", injectorNS, "--wait", "--timeout", "3m",
		"--set", "injector.enabled=true",
		"--set", "injector.namespaceSelector.matchLabels."+strings.ReplaceAll(injectorLabel, ".", `\.`)+"=true",
		"--set", "injector.certs.overlap="+certOverlap.String()); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, injectorNS)
		}
		if _, err := manifest.Run(helm, "uninstall", injectorRelease, "--namespace", injectorNS, "--wait"); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})
	return injectorReplicas(t)
}

// injectorReplicas waits for the controller's rollout and a leader.
func injectorReplicas(t *testing.T) []ctlReplica {
	t.Helper()
	var replicas []ctlReplica
	for _, p := range rollout(t, injectorNS, injectorCtl) {
		replicas = append(replicas, ctlReplica{p.Metadata.Name, p.Status.PodIP})
	}
	waitFor(t, podWait, func() bool { _, ok := leading(replicas); return ok }, func() string { return "no replica leads" })
	waitFor(t, podWait, func() bool {
		bundle, _ := kubectl(nil, "get", "mutatingwebhookconfiguration", injectorWebhook, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
		return strings.TrimSpace(bundle) != ""
	}, func() string { return "the leader wrote no caBundle into the webhook configuration" })
	return replicas
}

// injectorNamespace is a namespace of the test's own that the webhook sees.
func injectorNamespace(t *testing.T) string {
	t.Helper()
	ns := namespace(t)
	mustKubectl(t, nil, "label", "namespace", ns, injectorLabel+"=true")
	return ns
}

// kubectlWarnings runs kubectl and returns what it printed on stderr: the
// API server's warnings.
func kubectlWarnings(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stderr.String()
}

// events are the reasons and messages of the Events about an object.
func events(ns, kind, name, reason string) []string {
	out, _ := kubectl(nil, "-n", ns, "get", "events", "--field-selector",
		"involvedObject.kind="+kind+",involvedObject.name="+name+",reason="+reason, "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
	return strings.FieldsFunc(out, func(r rune) bool { return r == '\n' })
}

// adoptionLines is how many lines a user adds to a manifest to adopt
// hotreload: the lines of after that before lacks (a longest common
// subsequence of lines), comments and blank lines left out.
func adoptionLines(before, after string) []string {
	a, b := yamlLines(before), yamlLines(after)
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var added []string
	i, j := 0, 0
	for j < len(b) {
		switch {
		case i < len(a) && a[i] == b[j]:
			i, j = i+1, j+1
		case i < len(a) && lcs[i+1][j] >= lcs[i][j+1]:
			i++
		default:
			added = append(added, b[j])
			j++
		}
	}
	return added
}

// yamlLines are the lines of a manifest that say something.
func yamlLines(manifest string) []string {
	var out []string
	for _, l := range strings.Split(manifest, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, l)
		}
	}
	return out
}

// withoutHotreload is a workload manifest as it was before it adopted
// hotreload by annotation: the hotreload.dev/ lines gone, and an
// annotations key they leave empty.
func withoutHotreload(manifest string) string {
	lines := yamlLines(manifest)
	var out []string
	for i, l := range lines {
		if strings.Contains(l, "hotreload.dev/") {
			continue
		}
		if strings.TrimSpace(l) == "annotations:" && i+1 < len(lines) && strings.Contains(lines[i+1], "hotreload.dev/") {
			indent := len(l) - len(strings.TrimLeft(l, " "))
			k := i + 1
			for k < len(lines) && strings.Contains(lines[k], "hotreload.dev/") {
				k++
			}
			if k >= len(lines) || len(lines[k])-len(strings.TrimLeft(lines[k], " ")) <= indent {
				continue // nothing else under it
			}
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// handWrittenLines counts the lines of the hotreload container and of the
// volumes it alone uses in a hand-written example: what the injector saves.
func handWrittenLines(manifest string) int {
	n, in, indent := 0, false, 0
	for _, l := range strings.Split(manifest, "\n") {
		trimmed := strings.TrimSpace(l)
		ind := len(l) - len(strings.TrimLeft(l, " "))
		switch {
		case trimmed == "- name: hotreload" || trimmed == "- name: hotreload-state":
			in, indent = true, ind
		case in && (ind < indent || (ind == indent && strings.HasPrefix(trimmed, "- "))) && trimmed != "":
			in = false
		}
		if in && trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			n++
		}
	}
	return n
}

func TestInjector(t *testing.T) {
	replicas := startInjector(t)
	leader := leaderOf(t, replicas)
	figure(t, "the chart's injector ready: %d replicas, certificates in the webhook configuration", len(replicas))

	t.Run("one annotation", func(t *testing.T) {
		ns := injectorNamespace(t)
		after := string(readManifest(t, "examples/injector/workload.yaml"))
		before := withoutHotreload(after)
		added := adoptionLines(before, after)
		figure(t, "lines a user adds to a Deployment to adopt hotreload with the injector: %d %q; by hand (examples/controller/workload.yaml, the sidecar and its volume): %d",
			len(added), added, handWrittenLines(string(readManifest(t, "examples/controller/workload.yaml"))))
		if len(added) > 2 {
			t.Errorf("%d lines to adopt hotreload, want 1 or 2: %q", len(added), added)
		}

		// The Deployment as it was, then with the annotation alone.
		apply(t, ns, []byte(before))
		old := onePod(t, ns, "my-app")
		if _, ok := old.container(injector.ContainerName); ok {
			t.Fatal("a sidecar before the annotation")
		}
		apply(t, ns, []byte(after))
		p := onePod(t, ns, "my-app")
		if p.Metadata.UID == old.Metadata.UID {
			t.Fatal("the annotated Deployment rolled out no new pod")
		}
		full := podObject(t, ns, p.Metadata.Name)
		if len(full.Spec.InitContainers) != 1 || full.Spec.InitContainers[0].Name != injector.ContainerName ||
			full.Spec.InitContainers[0].RestartPolicy == nil || *full.Spec.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Fatalf("init containers %+v: want the native sidecar (Kubernetes 1.33)", full.Spec.InitContainers)
		}
		if full.Annotations[injector.AnnotationInjected] != "native" || full.Annotations[injector.AnnotationNudge] != "true" {
			t.Errorf("annotations %v", full.Annotations)
		}
		if _, err := kubectl(nil, "-n", ns, "get", "secret", "hotreload-content-key"); err != nil {
			t.Errorf("no content key Secret: %v", err)
		}
		// An edit reaches the app: the controller nudges the pod, the
		// sidecar reloads it.
		start := time.Now()
		editConfigMap(t, ns, "my-app-config", "app.yaml", func(s string) string { return strings.Replace(s, "greeting: hello", "greeting: e2e-injected", 1) })
		waitBody(t, nudgeWait, p.url(8080, "/config"), "e2e-injected")
		figure(t, "an edit served by an injected pod %.2f s after kubectl patch (nudged by the controller)", time.Since(start).Seconds())
		waitMetric(t, nudgeWait, p.url(hotreloadPort, "/metrics"), "hotreload_last_reload_successful", nil, 1)
	})

	t.Run("a bad annotation", func(t *testing.T) {
		ns := injectorNamespace(t)
		// The pod of the other cases (its app serves), with an annotation
		// that does not parse.
		bad := podManifest("bad", map[string]string{injector.AnnotationSignal: "SIGNOPE", injector.AnnotationProcessName: "app"})
		warnings := kubectlWarnings(t, bad, "-n", ns, "apply", "-f", "-")
		if !strings.Contains(warnings, `Warning: hotreload: hotreload.dev/signal "SIGNOPE": unknown signal`) {
			t.Errorf("kubectl printed %q, want the injector's warning", warnings)
		}
		t.Logf("kubectl said: %s", strings.TrimSpace(warnings))
		full := podObject(t, ns, "bad")
		if len(full.Spec.InitContainers)+len(full.Spec.Containers) != 1 || full.Annotations[injector.AnnotationInjected] != "" {
			t.Errorf("the pod was changed: %d containers, annotations %v", len(full.Spec.InitContainers)+len(full.Spec.Containers), full.Annotations)
		}
		waitFor(t, nudgeWait, func() bool { return len(events(ns, "Pod", "bad", injector.ReasonNotInjected)) > 0 },
			func() string { return "no HotreloadNotInjected Event on the pod" })
		waitReady(t, ns, "bad")
	})

	t.Run("injector down", func(t *testing.T) {
		ns := injectorNamespace(t)
		mustKubectl(t, nil, "-n", injectorNS, "scale", "deployment", injectorCtl, "--replicas=0")
		waitFor(t, podWait, func() bool {
			pods, err := podsOf(injectorNS, map[string]string{"app.kubernetes.io/instance": injectorRelease})
			return err == nil && len(pods) == 0
		}, func() string { return "the controller's pods are still there" })
		start := time.Now()
		apply(t, ns, podManifest("missed", map[string]string{injector.AnnotationReloadURL: "http://127.0.0.1:8080/admin/reload"}))
		created := time.Since(start)
		p := waitReady(t, ns, "missed")
		figure(t, "a pod created while the injector is scaled to 0: kubectl apply took %.2f s, Ready %.1f s after", created.Seconds(), time.Since(start).Seconds())
		if _, ok := p.container(injector.ContainerName); ok {
			t.Fatal("a sidecar with the injector down")
		}
		mustKubectl(t, nil, "-n", injectorNS, "scale", "deployment", injectorCtl, "--replicas=2")
		replicas = injectorReplicas(t)
		leader = leaderOf(t, replicas)
		var msgs []string
		waitFor(t, podWait, func() bool {
			msgs = events(ns, "Pod", "missed", injector.ReasonMissing)
			return len(msgs) > 0
		}, func() string { return "no HotreloadSidecarMissing Event on the pod" })
		t.Logf("Event: %s", msgs[0])
		reported := time.Since(start)
		for _, r := range replicas {
			waitMetric(t, nudgeWait, r.metrics(), "hotreload_controller_injection_missed_pods", map[string]string{"pod_namespace": ns}, 1)
		}
		if v, _, _ := metric(leader.metrics(), "hotreload_controller_injections_missed_total", nil); v < 1 {
			t.Errorf("hotreload_controller_injections_missed_total = %v on the leader", v)
		}
		figure(t, "the missed injection reported %.1f s after the pod was created (the injector back after a scale to 0)", reported.Seconds())
	})

	t.Run("certificates rotated while pods are created", func(t *testing.T) {
		ns := injectorNamespace(t)
		cs := k8sClient(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Pods that no node runs: the API server admits them, nothing else
		// is asked of the machine.
		var (
			mu      sync.Mutex
			created []string
			failed  []error
			wg      sync.WaitGroup
		)
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				p := podSpec(fmt.Sprintf("rotation-%03d", i), map[string]string{injector.AnnotationReloadURL: "http://127.0.0.1:8080/admin/reload"})
				p.Spec.NodeSelector = map[string]string{"e2e.hotreload.dev/no-such-node": "true"}
				_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				mu.Lock()
				if err != nil && ctx.Err() == nil {
					failed = append(failed, err)
				} else if err == nil {
					created = append(created, p.Name)
				}
				mu.Unlock()
				time.Sleep(200 * time.Millisecond)
			}
		})
		rotations := func(kind string) float64 {
			v, _, _ := metric(leader.metrics(), "hotreload_controller_injector_certificate_rotations_total", map[string]string{"kind": kind})
			return v
		}
		rotate := func(kind string, want float64) {
			t.Helper()
			mustKubectl(t, nil, "-n", injectorNS, "annotate", "--overwrite", "secret", injectorSecret, "hotreload.dev/rotate="+kind)
			waitFor(t, podWait, func() bool { return rotations(kind) >= want }, func() string {
				return fmt.Sprintf("%s rotations %v, want %v", kind, rotations(kind), want)
			})
		}
		certs, cas := rotations("cert"), rotations("ca")
		start := time.Now()
		rotate("cert", certs+1)
		time.Sleep(2 * time.Second)
		rotate("cert", certs+2)
		// A CA: trusted at once, signing certOverlap later.
		rotate("ca", cas+1)
		time.Sleep(certOverlap + 5*time.Second)
		rotate("cert", rotations("cert")+1)
		time.Sleep(3 * time.Second)
		cancel()
		wg.Wait()
		took := time.Since(start)

		mu.Lock()
		defer mu.Unlock()
		if len(failed) > 0 {
			t.Errorf("%d creates failed, the first: %v", len(failed), failed[0])
		}
		list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var without []string
		for _, p := range list.Items {
			if p.Annotations[injector.AnnotationInjected] != "native" || !slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == injector.ContainerName }) {
				without = append(without, p.Name)
			}
		}
		figure(t, "certificates rotated while pods were created: %v cert and %v CA rotations in %.0f s, %d pods created, %d without the sidecar",
			rotations("cert")-certs, rotations("ca")-cas, took.Seconds(), len(list.Items), len(without))
		if len(list.Items) < 50 || len(without) > 0 {
			t.Errorf("%d pods, of which without the sidecar: %q", len(list.Items), without)
		}
		if v, _, _ := metric(leader.metrics(), "hotreload_controller_injections_total", map[string]string{"result": "error"}); v != 0 {
			t.Errorf("%v reviews failed", v)
		}
	})
}

// podSpec is a pod of the test app with annotations.
func podSpec(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{"app.kubernetes.io/name": "e2e-injector"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:         "app",
				Image:        "registry.example.com/my-app:1.0.0",
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/my-app"}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "my-app-config"}, Optional: ptr.To(true),
			}}}},
		},
	}
}

func podManifest(name string, annotations map[string]string) []byte {
	p := podSpec(name, annotations)
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	b, _ := json.Marshal(p)
	return b
}

// podObject reads a pod whole.
func podObject(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal([]byte(mustKubectl(t, nil, "-n", ns, "get", "pod", name, "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}
