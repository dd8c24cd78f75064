//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-logfmt/logfmt"
	dto "github.com/prometheus/client_model/go"
)

// TestReplicas runs examples/generic/sidecar.yaml as shipped, scaled to 3
// replicas as a user would (`kubectl scale`): a ConfigMap edit reaches every
// replica's app, and hotreload_volume_content_info, scraped from each pod's
// own address, shows the same content on all three. Then the pods are
// replaced, by a rolling update (an env change of the app's container) and
// by deleting one: each new pod starts with the current config, its
// hotreload becomes Ready, and no reload is sent at its start (the app has
// loaded its config once, and hotreload counts no reload).
func TestReplicas(t *testing.T) {
	t.Parallel()
	const (
		deploy     = "my-app"
		configDir  = "/etc/my-app/config"
		configFile = configDir + "/app.yaml"
	)
	app := exampleApps["generic"]
	ns := namespace(t)
	mustKubectl(t, nil, "-n", ns, "apply", "-f", "../../examples/generic/sidecar.yaml")
	mustKubectl(t, nil, "-n", ns, "scale", "deployment", deploy, "--replicas=3")
	pods := rollout(t, ns, deploy)
	if len(pods) != 3 {
		t.Fatalf("%d pods after scaling to 3", len(pods))
	}
	before := contentHashes(t, pods, configDir)

	editConfigMap(t, ns, app.configMap, app.key, app.edit)
	for _, p := range pods {
		nudge(t, ns, p.Metadata.Name)
	}
	for _, p := range pods {
		l := waitLoaded(t, nudgeWait, p.url(app.port, ""), configFile, "e2e-added")
		if l.Generation != 2 {
			t.Errorf("%s: the app is at generation %d after one edit, want 2 (its start, then one reload)", p.Metadata.Name, l.Generation)
		}
		waitMetric(t, nudgeWait, p.url(hotreloadPort, "/metrics"), "hotreload_reloads_total", map[string]string{"result": "success"}, 1)
	}
	edited := contentHashes(t, pods, configDir)
	if edited == before {
		t.Fatalf("hotreload_volume_content_info shows %s before and after the edit", edited)
	}
	// Through the Service, whichever replica answers.
	waitBody(t, nudgeWait, serviceURL(t, ns, "my-app", app.servicePort, app.path), "e2e-added")

	// checkFresh checks a pod that started after the edit.
	checkFresh := func(t *testing.T, p pod) {
		t.Helper()
		l := waitLoaded(t, nudgeWait, p.url(app.port, ""), configFile, "e2e-added")
		if l.Generation != 1 {
			t.Errorf("%s: the app is at generation %d, want 1: it was reloaded at its start", p.Metadata.Name, l.Generation)
		}
		if c, _ := p.container("hotreload"); !c.Ready {
			t.Errorf("%s: hotreload is not Ready", p.Metadata.Name)
		}
		mfs := scrape(t, p.url(hotreloadPort, "/metrics"))
		if n := sumOf(mfs["hotreload_reloads_total"]); n != 0 {
			t.Errorf("%s: hotreload_reloads_total is %v at start, want 0", p.Metadata.Name, n)
		}
		logs := containerLogs(ns, p.Metadata.Name, "hotreload", false)
		for _, msg := range []string{"reloading on start", "content changed while hotreload was not running, reloading", "content changed, reloading"} {
			if logLine(logs, msg) != nil {
				t.Errorf("%s: hotreload logged %q:\n%s", p.Metadata.Name, msg, logs)
			}
		}
	}

	t.Run("rolling update", func(t *testing.T) {
		old := names(pods)
		mustKubectl(t, nil, "-n", ns, "set", "env", "deployment/"+deploy, "-c", "app", "E2E_ROLLOUT=1")
		pods = rollout(t, ns, deploy)
		for _, p := range pods {
			if slices.Contains(old, p.Metadata.Name) {
				t.Fatalf("pod %s outlived the rolling update", p.Metadata.Name)
			}
			checkFresh(t, p)
		}
		if got := contentHashes(t, pods, configDir); got != edited {
			t.Errorf("after the rolling update the pods show %s, before it %s", got, edited)
		}
	})

	t.Run("deleted pod", func(t *testing.T) {
		gone := pods[0].Metadata.Name
		old := names(pods)
		mustKubectl(t, nil, "-n", ns, "delete", "pod", gone, "--wait=false")
		// The deleted pod is terminating at once: rollout waits until its
		// replacement is ready and it is gone.
		pods = rollout(t, ns, deploy)
		var fresh []pod
		for _, p := range pods {
			if !slices.Contains(old, p.Metadata.Name) {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) != 1 || slices.Contains(names(pods), gone) {
			t.Fatalf("after deleting %s of %v the pods are %v, want one new", gone, old, names(pods))
		}
		checkFresh(t, fresh[0])
		if got := contentHashes(t, pods, configDir); got != edited {
			t.Errorf("after a pod's replacement the pods show %s, before it %s", got, edited)
		}
	})
}

// contentHashes scrapes hotreload_volume_content_info for dir from every
// pod's own address, fails the test unless all show one hash, and returns it.
func contentHashes(t *testing.T, pods []pod, dir string) string {
	t.Helper()
	var first string
	var seen []string
	for _, p := range pods {
		hash := ""
		for _, m := range scrape(t, p.url(hotreloadPort, "/metrics"))["hotreload_volume_content_info"].GetMetric() {
			if label(m, "dir") == dir && m.GetGauge().GetValue() == 1 {
				hash = label(m, "hash")
			}
		}
		if hash == "" {
			t.Fatalf("%s serves no hotreload_volume_content_info{dir=%q}", p.Metadata.Name, dir)
		}
		seen = append(seen, p.Metadata.Name+"="+hash)
		if first == "" {
			first = hash
		}
		if hash != first {
			t.Errorf("the replicas disagree on the content of %s: %s", dir, strings.Join(seen, " "))
		}
	}
	return first
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sumOf adds up every series of a counter family; 0 for none.
func sumOf(mf *dto.MetricFamily) float64 {
	var n float64
	for _, m := range mf.GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

// names lists pods' names.
func names(pods []pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Metadata.Name)
	}
	return out
}

// logLine returns the key-value pairs of the first logfmt line of logs
// whose msg is msg, or nil.
func logLine(logs, msg string) map[string]string {
	d := logfmt.NewDecoder(strings.NewReader(logs))
	for d.ScanRecord() {
		kv := map[string]string{}
		for d.ScanKeyval() {
			kv[string(d.Key())] = string(d.Value())
		}
		if kv["msg"] == msg {
			return kv
		}
	}
	return nil
}
