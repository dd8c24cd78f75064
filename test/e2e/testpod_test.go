//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
)

// testPod is a pod of the suite's own: the test app reading dirs, and
// hotreload watching the same volumes, both hardened as the examples are.
// It is a bare Pod, not a Deployment: the tests that use it follow one pod's
// containers by name (their processes, restarts and logs) and read the
// config its app loaded, and a Deployment would only add a generated name.
// The examples' Deployments are tested as such (examples_test.go,
// replicas_test.go).
type testPod struct {
	name          string
	ip            string            // the pod's address, once start has returned
	volumes       []object          // pod volumes
	mounts        map[string]string // volume name -> mount path, in both containers
	hotreloadArgs []string          // after --volume-dir and --webhook-url
	appSpec       func(c object)    // changes to the app's container, if any
	hotreloadSpec func(c object)    // changes to hotreload's container, if any
	podSpec       func(spec object) // changes to the pod's spec, if any
}

func (p testPod) manifest(t *testing.T) []byte {
	t.Helper()
	var mounts []any
	var dirs []string
	for vol, path := range p.mounts {
		mounts = append(mounts, object{"name": vol, "mountPath": path, "readOnly": true})
		dirs = append(dirs, path)
	}
	hardened := func() object {
		return object{
			"readOnlyRootFilesystem":   true,
			"allowPrivilegeEscalation": false,
			"capabilities":             object{"drop": []any{"ALL"}},
		}
	}
	appArgs := []any{fmt.Sprintf("--listen=:%d", testAppPort), "--token-file="}
	hrArgs := []any{fmt.Sprintf("--web.listen-address=:%d", hotreloadPort),
		fmt.Sprintf("--webhook-url=http://127.0.0.1:%d/admin/reload", testAppPort)}
	for _, d := range dirs {
		appArgs = append(appArgs, "--dir="+d)
		hrArgs = append(hrArgs, "--volume-dir="+d)
	}
	for _, a := range p.hotreloadArgs {
		hrArgs = append(hrArgs, a)
	}
	probe := func(path string) object {
		return object{"httpGet": object{"path": path, "port": hotreloadPort}, "periodSeconds": 2}
	}
	hr := object{
		"name": "hotreload", "image": "localhost/hotreload:e2e", "imagePullPolicy": "Never",
		"args": hrArgs, "volumeMounts": mounts, "securityContext": hardened(),
		"readinessProbe": probe("/-/ready"), "livenessProbe": probe("/-/healthy"),
	}
	if p.hotreloadSpec != nil {
		p.hotreloadSpec(hr)
	}
	app := object{
		"name": "app", "image": "localhost/hotreload-e2e/testapp:e2e", "imagePullPolicy": "Never",
		"args": appArgs, "volumeMounts": mounts, "securityContext": hardened(),
	}
	if p.appSpec != nil {
		p.appSpec(app)
	}
	spec := object{
		"automountServiceAccountToken": false,
		"securityContext":              object{"runAsNonRoot": true, "seccompProfile": object{"type": "RuntimeDefault"}},
		"containers":                   []any{app, hr},
		"volumes":                      toAny(p.volumes),
	}
	if p.podSpec != nil {
		p.podSpec(spec)
	}
	meta := object{"name": p.name, "labels": object{podLabel: p.name}}
	b, err := json.Marshal(object{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toAny(objs []object) []any {
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// testAppPort is where the test app of a test pod listens (hotreload's
// metrics are on hotreloadPort, as in the examples).
const testAppPort = 8080

// podLabel names a test pod, for a Service to select it by.
const podLabel = "e2e.hotreload.dev/pod"

// start creates the pod in ns, waits until it is Ready, and returns p with
// its address.
func (p testPod) start(t *testing.T, ns string) testPod {
	t.Helper()
	apply(t, ns, p.manifest(t))
	p.ip = waitReady(t, ns, p.name).Status.PodIP
	return p
}

// app is the base URL of the pod's test app; metrics, hotreload's metrics.
func (p testPod) app() string     { return fmt.Sprintf("http://%s:%d", p.ip, testAppPort) }
func (p testPod) metrics() string { return fmt.Sprintf("http://%s:%d/metrics", p.ip, hotreloadPort) }

// loaded is what the test app says it loaded.
type loaded struct {
	Generation int               `json:"generation"`
	LoadedAt   time.Time         `json:"loaded_at"`
	Files      map[string]string `json:"files"`
	Env        map[string]string `json:"env,omitempty"`
}

// appConfig asks the test app at base (http://host:port) what it loaded.
func appConfig(base string) (loaded, error) {
	var l loaded
	code, body, err := binary.Get(base + "/config")
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal([]byte(body), &l)
}

// waitLoaded waits until the test app at base has loaded a file whose
// content contains want.
func waitLoaded(t *testing.T, timeout time.Duration, base, file, want string) loaded {
	t.Helper()
	var (
		l   loaded
		err error
	)
	waitFor(t, timeout, func() bool {
		l, err = appConfig(base)
		return err == nil && strings.Contains(l.Files[file], want)
	}, func() string {
		return fmt.Sprintf("app at %s never loaded %q in %s: %v, %+v", base, want, file, err, l)
	})
	return l
}

// warmUp makes one edit of the ConfigMap "settings" (mounted at dir) reach
// the app, with a nudge. A pod that has just started is synced again by the
// kubelet as its containers and probes settle; once an edit has gone
// through, the pod is in the steady state of a running cluster, where the
// kubelet syncs it only when asked or at its syncFrequency.
func warmUp(t *testing.T, ns string, p testPod, dir string) {
	t.Helper()
	stamp := fmt.Sprint(time.Now().UnixNano())
	patchConfigMap(t, ns, "settings", map[string]string{"warm-up": stamp})
	nudge(t, ns, p.name)
	waitLoaded(t, nudgeWait, p.app(), dir+"/warm-up", stamp)
}

func configMapVolume(name, cm string) object {
	return object{"name": name, "configMap": object{"name": cm}}
}
