//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The suite applies the manifests of examples/ as shipped: Deployments,
// Services, the controller's RBAC. The images they name are the ones built
// from this checkout, loaded under the shipped names (cluster/load-images.sh
// and cluster/shipped-images.txt). A test that changes an example (the nginx
// variants with a root master) says so and changes the Deployment's pod
// template, nothing else.

// rolloutWait bounds a Deployment's rollout: pods are scheduled, their
// images are local, but the machine is shared.
const rolloutWait = 3 * time.Minute

// object is one manifest, decoded.
type object = map[string]any

// decode splits a YAML stream into its objects.
func decode(t *testing.T, manifests []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range bytes.Split(manifests, []byte("\n---")) {
		// Keep the document's last line break: a block scalar at the end
		// of a document ends with one only if the document does.
		doc = append(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")), '\n')
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("decode manifest: %v\n%s", err, doc)
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
	return objs
}

// encode joins objects into a stream kubectl reads.
func encode(t *testing.T, objs []object) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(b)
		out.WriteString("\n")
	}
	return out.Bytes()
}

// readManifest reads a file of examples/ (a path relative to the module root).
func readManifest(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withTemplate returns manifests with edit applied to the pod template
// (metadata and spec) of every Deployment in them.
func withTemplate(t *testing.T, manifests []byte, edit func(template object)) []byte {
	t.Helper()
	objs := decode(t, manifests)
	for _, o := range objs {
		if o["kind"] == "Deployment" {
			edit(dig[object](o, "spec", "template"))
		}
	}
	return encode(t, objs)
}

// dig returns the value at a path of keys, or T's zero value.
func dig[T any](o object, keys ...string) T {
	var cur any = o
	for _, k := range keys {
		m, ok := cur.(object)
		if !ok {
			var zero T
			return zero
		}
		cur = m[k]
	}
	v, _ := cur.(T)
	return v
}

// deployment is the part of a Deployment the tests read.
type deployment struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		Replicas int `json:"replicas"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		Replicas           int   `json:"replicas"`
		UpdatedReplicas    int   `json:"updatedReplicas"`
		ReadyReplicas      int   `json:"readyReplicas"`
		AvailableReplicas  int   `json:"availableReplicas"`
	} `json:"status"`
}

// rollout waits until a Deployment has rolled out, as `kubectl rollout
// status` sees it (every replica of the current template updated and
// available, none of an older one left), and until only those pods are
// left, none terminating. It returns them, sorted by name.
func rollout(t *testing.T, ns, name string) []pod {
	t.Helper()
	var (
		d    deployment
		pods []pod
		err  error
	)
	waitFor(t, rolloutWait, func() bool {
		var out string
		if out, err = kubectl(nil, "-n", ns, "get", "deployment", name, "-o", "json"); err != nil {
			return false
		}
		if err = json.Unmarshal([]byte(out), &d); err != nil {
			return false
		}
		want := d.Spec.Replicas
		if d.Status.ObservedGeneration < d.Metadata.Generation || d.Status.UpdatedReplicas != want ||
			d.Status.Replicas != want || d.Status.AvailableReplicas != want {
			return false
		}
		if pods, err = podsOf(ns, d.Spec.Selector.MatchLabels); err != nil {
			return false
		}
		return len(pods) == want && !slices.ContainsFunc(pods, func(p pod) bool {
			return p.Metadata.DeletionTimestamp != nil || !p.ready() || p.Status.PodIP == ""
		})
	}, func() string {
		return fmt.Sprintf("deployment %s/%s has not rolled out: %+v, %d pods, err %v", ns, name, d.Status, len(pods), err)
	})
	return pods
}

// podsOf lists the pods that match labels, sorted by name.
func podsOf(ns string, labels map[string]string) ([]pod, error) {
	var sel []string
	for k, v := range labels {
		sel = append(sel, k+"="+v)
	}
	out, err := kubectl(nil, "-n", ns, "get", "pods", "-l", strings.Join(sel, ","), "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []pod `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b pod) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	return list.Items, nil
}

// onePod waits for a Deployment of one replica to roll out and returns its pod.
func onePod(t *testing.T, ns, name string) pod {
	t.Helper()
	pods := rollout(t, ns, name)
	if len(pods) != 1 {
		t.Fatalf("deployment %s/%s has %d pods, want 1", ns, name, len(pods))
	}
	return pods[0]
}

// url is http://POD_IP:port/path: the pod reached on the pod network.
func (p pod) url(port int, path string) string {
	return fmt.Sprintf("http://%s:%d%s", p.Status.PodIP, port, path)
}

// serviceURL is http://CLUSTER_IP:port/path: a Service reached through
// kube-proxy, from this host as the API server reaches a webhook's.
func serviceURL(t *testing.T, ns, name string, port int, path string) string {
	t.Helper()
	ip := strings.TrimSpace(mustKubectl(t, nil, "-n", ns, "get", "service", name, "-o", "jsonpath={.spec.clusterIP}"))
	if ip == "" || ip == "None" {
		t.Fatalf("service %s/%s has no cluster IP", ns, name)
	}
	return fmt.Sprintf("http://%s:%d%s", ip, port, path)
}
