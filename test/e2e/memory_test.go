//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/kubemem"
)

// Memory as the kubelet counts it, in real pods (issue 28): the method of
// make bench's BenchmarkMemory (test/cost), with the kubelet, containerd and
// runc doing what the benchmark imitates. Printed, never asserted: a busy
// node prints busy figures.

// The schedule, in seconds from the moment every pod is Ready.
const (
	memScrapeEvery = 15 // a common Prometheus scrape interval
	memScrapeAt    = 5  // the scrapes' offset in each interval
	memSampleEvery = 5
	// memWindow runs past hotreload's first resync (2m, a re-read of every
	// volume) and the Go runtime's forced collection (2 minutes without one).
	memWindow      = 150
	memAfterChange = 30 // after one edit: two more scrapes
	memReplicas    = 3  // pods of each kind, per sidecar
	memVolumes     = 10 // ConfigMap volumes of 2 keys each, as BenchmarkMemory's
)

// memTool is a sidecar whose memory is measured.
type memTool struct {
	name string // its container's name
	// spec makes the test pod's hotreload container this tool's (nil:
	// hotreload itself). The container's args are hotreload's
	// --web.listen-address, --webhook-url and --volume-dir.
	spec func(c object)
}

// memPod is one pod measured: its sidecar's memory cgroup, and the samples
// of the phase under way.
type memPod struct {
	tool      string
	scraped   bool
	pod       testPod
	cgroup    string
	client    *http.Client // keeps its connection between scrapes, as Prometheus does
	scrapes   int
	ws, usage []uint64
}

func (m *memPod) kind() string {
	if m.scraped {
		return m.tool + " (scraped)"
	}
	return m.tool + " (idle)"
}

// TestSidecarMemory prints hotreload's memory in real pods, as the kubelet
// counts it, idle and scraped; make compare-memory prints configmap-reload's
// beside it (TestCompareMemory).
func TestSidecarMemory(t *testing.T) {
	t.Parallel()
	measureMemory(t)
}

// measureMemory runs memReplicas pods of each kind (scraped: GET /metrics
// every 15 s from this host to the pod's address, as Prometheus 3 asks;
// idle: never scraped, the kubelet's probes only, at their default period)
// for hotreload and each peer. Each pod is the suite's test app and the
// sidecar on the same memVolumes ConfigMap volumes. It samples every
// sidecar container's cgroup every 5 s for memWindow seconds, edits one
// ConfigMap (each pod annotated, so that the kubelet writes it at once),
// and samples memAfterChange seconds more. It prints the working set and
// usage, mean and range per kind and phase, and the kubelet's own figures
// (/stats/summary, what kubectl top shows) at the end of each phase. It
// asserts that the figures were read, that no sidecar restarted, that
// every scrape answered, and that every app loaded the edit.
func measureMemory(t *testing.T, peers ...memTool) {
	ns := namespace(t)
	var cms []string
	var volumes []object
	mounts := map[string]string{}
	for i := range memVolumes {
		name := fmt.Sprintf("memory-%d", i)
		cms = append(cms, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: %q, b: %q}\n", name, name+"-a", name+"-b"))
		volumes = append(volumes, configMapVolume(name, name))
		mounts[name] = "/etc/memory/" + name
	}
	apply(t, ns, []byte(strings.Join(cms, "---\n")))

	var pods []*memPod
	var manifests []string
	for _, tl := range append([]memTool{{name: "hotreload"}}, peers...) {
		for _, scraped := range []bool{true, false} {
			for i := range memReplicas {
				m := &memPod{tool: tl.name, scraped: scraped}
				m.pod = testPod{
					name:    fmt.Sprintf("%s-%s-%d", tl.name, map[bool]string{true: "scraped", false: "idle"}[scraped], i),
					volumes: volumes, mounts: mounts,
					hotreloadSpec: func(c object) {
						// The kubelet's default period (10 s), as the
						// examples' pods are probed.
						for _, probe := range []string{"readinessProbe", "livenessProbe"} {
							delete(dig[object](c, probe), "periodSeconds")
						}
						if tl.spec != nil {
							tl.spec(c)
						}
					},
				}
				manifests = append(manifests, string(m.pod.manifest(t)))
				pods = append(pods, m)
			}
		}
	}
	apply(t, ns, []byte(strings.Join(manifests, "\n---\n")))
	for _, m := range pods {
		m.pod.ip = waitReady(t, ns, m.pod.name).Status.PodIP
		waitLoaded(t, podWait, m.pod.app(), "/etc/memory/memory-0/a", "memory-0-a")
		dir, err := kubemem.CgroupOf("/sys/fs/cgroup", mainProc(t, ns, m.pod.name, m.tool).PID)
		if err != nil {
			t.Fatal(err)
		}
		m.cgroup = dir
		m.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
		t.Cleanup(m.client.CloseIdleConnections)
	}
	figure(t, "memory: in real pods, %d of each kind per sidecar, each a test app and the sidecar on %d ConfigMap volumes of 2 keys; scraped = GET /metrics every %d s from the host to the pod's address as Prometheus 3 asks (OpenMetrics, gzip, one kept connection); idle = never scraped (hotreload probed by the kubelet on /-/ready and /-/healthy every 10 s, its default; configmap-reload has no probe endpoints); working set = cgroup usage - inactive file, as the kubelet computes it",
		memReplicas, memVolumes, memScrapeEvery)

	stamp := fmt.Sprint(time.Now().UnixNano())
	t0 := time.Now()
	for sec := 1; sec <= memWindow+memAfterChange; sec++ {
		time.Sleep(time.Until(t0.Add(time.Duration(sec) * time.Second))) // the schedule's clock, not a wait for an event
		for _, m := range pods {
			if m.scraped && sec%memScrapeEvery == memScrapeAt {
				m.scrape(t)
			}
			if sec%memSampleEvery == 0 {
				m.sample(t)
			}
		}
		if sec == memWindow {
			memReport(t, ns, pods, fmt.Sprintf("%d s", memWindow), fmt.Sprintf("over %d s", memWindow))
			patchConfigMap(t, ns, "memory-0", map[string]string{"a": stamp})
			var wg sync.WaitGroup
			for _, m := range pods {
				wg.Go(func() {
					if _, err := kubectl(nil, "-n", ns, "annotate", "--overwrite", "pod", m.pod.name, "e2e.hotreload.dev/nudge="+stamp); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
	}
	memReport(t, ns, pods, fmt.Sprintf("%d s after one edit", memAfterChange), fmt.Sprintf("over %d s after one edit", memAfterChange))

	for _, m := range pods {
		waitLoaded(t, nudgeWait, m.pod.app(), "/etc/memory/memory-0/a", stamp)
		p, err := getPod(ns, m.pod.name)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := p.container(m.tool); !ok || c.RestartCount != 0 {
			t.Errorf("%s: container %s restarted (%+v): its figures are not one container's", m.pod.name, m.tool, c)
		}
		if want := (memWindow + memAfterChange) / memScrapeEvery; m.scraped && m.scrapes != want {
			t.Errorf("%s: %d scrapes answered, want %d", m.pod.name, m.scrapes, want)
		}
	}
}

// scrape GETs the sidecar's /metrics as Prometheus does.
func (m *memPod) scrape(t *testing.T) {
	t.Helper()
	req, err := binary.ScrapeRequest(m.pod.metrics())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		t.Errorf("scrape %s: %v", m.pod.name, err)
		return
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || n == 0 {
		t.Errorf("scrape %s: status %d, %d bytes, %v", m.pod.name, resp.StatusCode, n, err)
		return
	}
	m.scrapes++
}

// sample reads the sidecar container's memory cgroup.
func (m *memPod) sample(t *testing.T) {
	t.Helper()
	st, err := kubemem.Read(m.cgroup)
	if err != nil {
		t.Fatalf("%s: %v", m.pod.name, err)
	}
	m.ws = append(m.ws, st.WorkingSet)
	m.usage = append(m.usage, st.Usage)
}

// memReport prints, per kind, the mean and range of the samples of the
// phase that ends (and starts the next), and the kubelet's figures of each
// pod now, from its /stats/summary.
func memReport(t *testing.T, ns string, pods []*memPod, at, over string) {
	t.Helper()
	doc := kubeletSummary(t)
	var kinds []string
	ws, usage, kubelet := map[string][]uint64{}, map[string][]uint64{}, map[string][]string{}
	for _, m := range pods {
		k := m.kind()
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
		ws[k] = append(ws[k], m.ws...)
		usage[k] = append(usage[k], m.usage...)
		m.ws, m.usage = m.ws[:0], m.usage[:0]
		st, err := kubemem.FromSummary(doc, ns, m.pod.name, m.tool)
		if errors.Is(err, kubemem.ErrNoFigures) {
			// Listed, without figures: said in the line, not a failure
			// of the sidecar.
			kubelet[k] = append(kubelet[k], "none")
			continue
		}
		if err != nil {
			t.Errorf("at %s: %v", at, err)
			continue
		}
		kubelet[k] = append(kubelet[k], fmt.Sprintf("%s/%s", kubemem.MiB(st.WorkingSet), kubemem.MiB(st.Usage)))
	}
	line := func(samples map[string][]uint64) string {
		var parts []string
		for _, k := range kinds {
			s := samples[k]
			if len(s) == 0 {
				t.Errorf("%s: no samples %s", k, over)
				continue
			}
			var sum uint64
			for _, v := range s {
				sum += v
			}
			parts = append(parts, fmt.Sprintf("%s %s (%s–%s)", k, kubemem.MiB(sum/uint64(len(s))), kubemem.MiB(slices.Min(s)), kubemem.MiB(slices.Max(s))))
		}
		return strings.Join(parts, ", ")
	}
	figure(t, "memory: working set (MiB) %s (mean and range of every pod's samples, every %d s): %s", over, memSampleEvery, line(ws))
	figure(t, "memory: usage (MiB) %s: %s", over, line(usage))
	var kl []string
	for _, k := range kinds {
		kl = append(kl, fmt.Sprintf("%s %s", k, strings.Join(kubelet[k], " ")))
	}
	figure(t, "memory: the kubelet's /stats/summary at %s, working set/usage (MiB) per pod (none: the summary lists the container without memory figures): %s", at, strings.Join(kl, "; "))
}

// kubeletSummary GETs the kubelet's /stats/summary (what kubectl top and
// the metrics server read) on its port, with the client certificate the API
// server uses to reach it: the API server's node proxy, the usual path,
// refuses a node whose address is loopback, as the suite's node is
// (cluster/up.sh).
func kubeletSummary(t *testing.T) []byte {
	t.Helper()
	pki := filepath.Join(os.Getenv("E2E_STATE"), "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-kubelet-client.crt"), filepath.Join(pki, "apiserver-kubelet-client.key"))
	if err != nil {
		t.Fatalf("the kubelet's client certificate: %v", err)
	}
	ca, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", filepath.Join(pki, "ca.crt"))
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: "localhost"},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://127.0.0.1:10250/stats/summary")
	if err != nil {
		t.Fatalf("the kubelet's stats summary: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	if err != nil {
		t.Fatalf("the kubelet's stats summary: %v", err)
	}
	return body
}
