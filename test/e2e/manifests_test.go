//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The one transform the suite applies to the shipped manifests, for what
// this cluster lacks and nothing else:
//
//   - no controller-manager or scheduler: a Deployment becomes the Pod its
//     template describes (named after the Deployment, or NAME-i for each of
//     several replicas), with spec.nodeName set to this node;
//   - no pod network: the pod uses the host's (hostNetwork: true);
//   - no registry: each image becomes the local image of the same program
//     (see localImages), with imagePullPolicy: Never.
//
// Every other field, the security contexts, probes, volumes, args and
// ports included, is applied as shipped.

// localImages maps a part of a shipped image's name to the image built by
// cluster/images.sh for the same program. The first match wins.
var localImages = []struct{ match, image string }{
	{"hotreload-controller", "localhost/hotreload-controller:e2e"},
	{"hotreload", "localhost/hotreload:e2e"},
	{"prometheus/prometheus", "localhost/hotreload-e2e/prometheus:e2e"},
	{"alertmanager", "localhost/hotreload-e2e/alertmanager:e2e"},
	{"nginx", "localhost/hotreload-e2e/nginx:e2e"},
	{"my-app", "localhost/hotreload-e2e/testapp:e2e"},
}

func localImage(image string) (string, error) {
	for _, m := range localImages {
		if strings.Contains(image, m.match) {
			return m.image, nil
		}
	}
	return "", fmt.Errorf("no local image for %q: add it to localImages and cluster/images.sh", image)
}

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

// forCluster applies the transform above. each, if not nil, is called on
// every pod made from a workload, with the replica's index.
func forCluster(t *testing.T, manifests []byte, each func(i int, pod object)) []byte {
	t.Helper()
	var out []object
	for _, o := range decode(t, manifests) {
		switch o["kind"] {
		case "Deployment", "StatefulSet", "DaemonSet":
			out = append(out, podsOf(t, o, each)...)
		default:
			out = append(out, o)
		}
	}
	return encode(t, out)
}

func podsOf(t *testing.T, workload object, each func(int, object)) []object {
	t.Helper()
	name := dig[string](workload, "metadata", "name")
	spec := dig[object](workload, "spec")
	replicas := 1
	if r, ok := spec["replicas"].(float64); ok {
		replicas = int(r)
	}
	var pods []object
	for i := range replicas {
		// A fresh copy of the template for every replica.
		var tmpl object
		b, _ := json.Marshal(spec["template"])
		_ = json.Unmarshal(b, &tmpl)
		meta, _ := tmpl["metadata"].(object)
		if meta == nil {
			meta = object{}
		}
		meta["name"] = name
		if replicas > 1 {
			meta["name"] = fmt.Sprintf("%s-%d", name, i)
		}
		podSpec := dig[object](tmpl, "spec")
		podSpec["nodeName"] = node
		podSpec["hostNetwork"] = true
		for _, list := range []string{"initContainers", "containers"} {
			cs, _ := podSpec[list].([]any)
			for _, c := range cs {
				c := c.(object)
				img, err := localImage(c["image"].(string))
				if err != nil {
					t.Fatal(err)
				}
				c["image"] = img
				c["imagePullPolicy"] = "Never"
			}
		}
		pod := object{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": podSpec}
		if each != nil {
			each(i, pod)
		}
		pods = append(pods, pod)
	}
	return pods
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
