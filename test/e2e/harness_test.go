//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
)

// The kubelet's default syncFrequency is 1m and it adds up to half of it as
// jitter: a test that waits for a ConfigMap change without nudging the pod
// must allow that, plus a margin.
const (
	syncWait  = 2 * time.Minute
	podWait   = 90 * time.Second
	nudgeWait = 30 * time.Second
	pollEvery = 100 * time.Millisecond
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBECONFIG") == "" {
		if os.Getenv("CI") == "true" {
			fmt.Println("FAIL: test/e2e: no cluster (KUBECONFIG is not set) and CI=true: run it with make e2e")
			os.Exit(1)
		}
		fmt.Println("SKIP: test/e2e: no cluster (KUBECONFIG is not set): run it with make e2e")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// figure prints a measured figure in a line that make e2e collects.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("E2E-FIGURE: "+format, args...)
}

// kubectl runs kubectl with args and returns its standard output; the error
// carries its standard error.
func kubectl(stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func mustKubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, err := kubectl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cond every pollEvery until it holds, and fails the test
// with what msg says at the deadline otherwise.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	poll.EventuallyEvery(t, pollEvery, timeout, cond, msg)
}

var nameRE = regexp.MustCompile(`[^a-z0-9-]+`)

// namespace creates a namespace of the test's own and waits until the
// controller-manager has given it its default ServiceAccount (without which
// the API server refuses a pod). At the end it prints the pods' logs and
// events if the test failed, and deletes the namespace, waiting until
// everything in it, the pods first, is gone.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.Trim(nameRE.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	ns := fmt.Sprintf("%s-%04x", strings.Trim(name, "-"), rand.IntN(1<<16))
	mustKubectl(t, nil, "create", "namespace", ns)
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, ns)
		}
		if _, err := kubectl(nil, "delete", "namespace", ns, "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	waitFor(t, podWait, func() bool {
		_, err := kubectl(nil, "-n", ns, "get", "serviceaccount", "default")
		return err == nil
	}, func() string { return "namespace " + ns + " has no default ServiceAccount" })
	return ns
}

// dump prints what tells why a test failed: the pods, their containers'
// logs (the current and the previous run), and the namespace's events.
func dump(t *testing.T, ns string) {
	t.Helper()
	out, _ := kubectl(nil, "-n", ns, "get", "pods", "-o", "wide")
	t.Logf("pods in %s:\n%s", ns, out)
	names, _ := kubectl(nil, "-n", ns, "get", "pods", "-o", "jsonpath={.items[*].metadata.name}")
	for _, pod := range strings.Fields(names) {
		out, _ = kubectl(nil, "-n", ns, "describe", "pod", pod)
		t.Logf("describe pod %s:\n%s", pod, out)
		for _, prev := range []string{"--previous=false", "--previous=true"} {
			out, err := kubectl(nil, "-n", ns, "logs", pod, "--all-containers", "--prefix", "--tail=80", prev)
			if err == nil && out != "" {
				t.Logf("logs of %s (%s):\n%s", pod, prev, out)
			}
		}
	}
	out, _ = kubectl(nil, "-n", ns, "get", "events", "--sort-by=.lastTimestamp")
	t.Logf("events in %s:\n%s", ns, out)
}

// apply applies manifests in ns.
func apply(t *testing.T, ns string, manifests []byte) {
	t.Helper()
	mustKubectl(t, manifests, "-n", ns, "apply", "-f", "-")
}

// pod is the part of a Pod the tests read.
type pod struct {
	Metadata struct {
		Name              string            `json:"name"`
		UID               string            `json:"uid"`
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp *time.Time        `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		PodIP      string `json:"podIP"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		ContainerStatuses     []containerStatus `json:"containerStatuses"`
		InitContainerStatuses []containerStatus `json:"initContainerStatuses"`
	} `json:"status"`
}

type containerStatus struct {
	Name         string `json:"name"`
	Ready        bool   `json:"ready"`
	RestartCount int    `json:"restartCount"`
	ContainerID  string `json:"containerID"`
	State        struct {
		Running *struct{} `json:"running"`
		Waiting *struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"waiting"`
		Terminated *struct {
			ExitCode int    `json:"exitCode"`
			Reason   string `json:"reason"`
		} `json:"terminated"`
	} `json:"state"`
	LastState struct {
		Terminated *struct {
			ExitCode int    `json:"exitCode"`
			Reason   string `json:"reason"`
		} `json:"terminated"`
	} `json:"lastState"`
}

func getPod(ns, name string) (pod, error) {
	var p pod
	out, err := kubectl(nil, "-n", ns, "get", "pod", name, "-o", "json")
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal([]byte(out), &p)
}

func (p pod) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// container returns the status of a container or init container by name.
func (p pod) container(name string) (containerStatus, bool) {
	for _, c := range slices.Concat(p.Status.ContainerStatuses, p.Status.InitContainerStatuses) {
		if c.Name == name {
			return c, true
		}
	}
	return containerStatus{}, false
}

func waitReady(t *testing.T, ns, name string) pod {
	t.Helper()
	var (
		p   pod
		err error
	)
	waitFor(t, podWait, func() bool {
		p, err = getPod(ns, name)
		return err == nil && p.ready()
	}, func() string {
		return fmt.Sprintf("pod %s/%s is not Ready: %v, phase %q", ns, name, err, p.Status.Phase)
	})
	return p
}

// nudge annotates a pod, which makes the kubelet sync it at once and so
// rewrite its ConfigMap and Secret volumes, instead of at its next periodic
// sync (up to 1.5 × syncFrequency later).
func nudge(t *testing.T, ns, name string) {
	t.Helper()
	mustKubectl(t, nil, "-n", ns, "annotate", "--overwrite", "pod", name, fmt.Sprintf("e2e.hotreload.dev/nudge=%d", time.Now().UnixNano()))
}

// patchConfigMap merges data into a ConfigMap's data.
func patchConfigMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"data": data})
	mustKubectl(t, nil, "-n", ns, "patch", "configmap", name, "--type=merge", "-p", string(patch))
}

// patchSecret merges stringData into a Secret.
func patchSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"stringData": data})
	mustKubectl(t, nil, "-n", ns, "patch", "secret", name, "--type=merge", "-p", string(patch))
}

// metric scrapes url and returns the value of a series, as test/support/binary's
// Value sums it.
func metric(url, name string, labels map[string]string) (float64, bool, error) {
	mfs, err := binary.Scrape(url)
	if err != nil {
		return 0, false, err
	}
	v, ok := binary.Value(mfs, name, labels)
	return v, ok, nil
}

// scrape returns every metric family at url, failing the test if it cannot.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := binary.Scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// waitMetric waits until a series at url has the value want.
func waitMetric(t *testing.T, timeout time.Duration, url, name string, labels map[string]string, want float64) {
	t.Helper()
	var (
		v   float64
		ok  bool
		err error
	)
	waitFor(t, timeout, func() bool {
		v, ok, err = metric(url, name, labels)
		return err == nil && ok && v == want
	}, func() string {
		return fmt.Sprintf("%s%v at %s: got %v (present %v, err %v), want %v", name, labels, url, v, ok, err, want)
	})
}

// waitBody waits until GET url answers 200 with a body that contains want.
func waitBody(t *testing.T, timeout time.Duration, url, want string) string {
	t.Helper()
	var (
		code int
		body string
		err  error
	)
	waitFor(t, timeout, func() bool {
		code, body, err = binary.Get(url)
		return err == nil && code == 200 && strings.Contains(body, want)
	}, func() string {
		return fmt.Sprintf("GET %s: status %d, err %v, body does not contain %q:\n%s", url, code, err, want, body)
	})
	return body
}

// containerLogs returns a container's log; previous asks for its last run.
func containerLogs(ns, name, container string, previous bool) string {
	out, _ := kubectl(nil, "-n", ns, "logs", name, "-c", container, fmt.Sprintf("--previous=%t", previous))
	return out
}
