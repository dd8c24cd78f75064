//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/internal/binary"
)

// testPod is a pod of the suite's own: the test app reading dirs, and
// hotreload watching the same volumes, both hardened as the examples are.
// Each pod gets its own ports, so that such tests run side by side.
type testPod struct {
	name          string
	appPort       int
	metricsPort   int
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
	appArgs := []any{fmt.Sprintf("--listen=:%d", p.appPort), "--token-file="}
	hrArgs := []any{fmt.Sprintf("--web.listen-address=:%d", p.metricsPort),
		fmt.Sprintf("--webhook-url=http://127.0.0.1:%d/admin/reload", p.appPort)}
	for _, d := range dirs {
		appArgs = append(appArgs, "--dir="+d)
		hrArgs = append(hrArgs, "--volume-dir="+d)
	}
	for _, a := range p.hotreloadArgs {
		hrArgs = append(hrArgs, a)
	}
	probe := func(path string) object {
		return object{"httpGet": object{"path": path, "port": p.metricsPort}, "periodSeconds": 2}
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
		"nodeName": node, "hostNetwork": true, "automountServiceAccountToken": false,
		"securityContext": object{"runAsNonRoot": true, "seccompProfile": object{"type": "RuntimeDefault"}},
		"containers":      []any{app, hr},
		"volumes":         toAny(p.volumes),
	}
	if p.podSpec != nil {
		p.podSpec(spec)
	}
	b, err := json.Marshal(object{"apiVersion": "v1", "kind": "Pod", "metadata": object{"name": p.name}, "spec": spec})
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

// loaded is what the test app says it loaded.
type loaded struct {
	Generation int               `json:"generation"`
	LoadedAt   time.Time         `json:"loaded_at"`
	Files      map[string]string `json:"files"`
	Env        map[string]string `json:"env,omitempty"`
}

func appConfig(port int) (loaded, error) {
	var l loaded
	code, body, err := binary.Get(fmt.Sprintf("http://127.0.0.1:%d/config", port))
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal([]byte(body), &l)
}

// waitLoaded waits until the app has loaded a file whose content contains want.
func waitLoaded(t *testing.T, timeout time.Duration, port int, file, want string) loaded {
	t.Helper()
	var (
		l   loaded
		err error
	)
	waitFor(t, timeout, func() bool {
		l, err = appConfig(port)
		return err == nil && strings.Contains(l.Files[file], want)
	}, func() string {
		return fmt.Sprintf("app on :%d never loaded %q in %s: %v, %+v", port, want, file, err, l)
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
	waitLoaded(t, nudgeWait, p.appPort, dir+"/warm-up", stamp)
}

func metricsURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", port) }

func configMapVolume(name, cm string) object {
	return object{"name": name, "configMap": object{"name": cm}}
}
