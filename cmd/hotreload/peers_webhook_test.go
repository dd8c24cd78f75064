//go:build linux

package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// webhookPeer describes an app reloaded by POST /-/reload, for
// testWebhookPeer.
type webhookPeer struct {
	name    string // binary
	pkg     string // Debian package
	file    string // the configuration item in the volume
	fixture string // testdata/peers/<fixture>-N-<stage>.yml
	// args are the app's flags besides its config file: listen on addr,
	// state under dir.
	args func(addr, dir string) []string
	// configured reports whether the configuration the app runs holds
	// want, from the body of GET configPath.
	configPath string
	configured func(t *testing.T, body, want string) bool
	// The stages' markers: each stage's configuration holds its marker,
	// the invalid one a marker that must never be live.
	added, invalid, fixed string
	// live, if set, waits until the added configuration is at work, beyond
	// being loaded.
	live func(t *testing.T, base string)
	// lastReloadOK is the app's own metric of its last reload.
	lastReloadOK string
	// refusal is what the app answers to the invalid configuration, which
	// hotreload's error log must quote.
	refusal string
}

// TestPrometheusReloadByWebhook runs Debian's prometheus with its
// configuration in a volume written the kubelet's way, and hotreload with
// --webhook-url pointing at its /-/reload: a new scrape job goes live, an
// invalid configuration is refused (the failure shows in hotreload's
// metrics and log, Prometheus keeps its old configuration), and a fixed
// one goes live again.
func TestPrometheusReloadByWebhook(t *testing.T) {
	t.Parallel()
	testWebhookPeer(t, webhookPeer{
		name:    "prometheus",
		pkg:     "prometheus",
		file:    "prometheus.yml",
		fixture: "prometheus",
		args: func(addr, dir string) []string {
			return []string{
				"--web.enable-lifecycle", "--web.listen-address=" + addr,
				"--storage.tsdb.path=" + filepath.Join(dir, "data"),
			}
		},
		configPath: "/api/v1/status/config",
		configured: func(t *testing.T, body, want string) bool {
			var resp struct {
				Status string
				Data   struct{ YAML string }
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Status != "success" {
				t.Fatalf("GET /api/v1/status/config: %v, status %q", err, resp.Status)
			}
			return strings.Contains(resp.Data.YAML, want)
		},
		live: func(t *testing.T, base string) {
			// Prometheus scrapes the added job's target, hotreload.
			var body string
			poll.EventuallyMsg(t, peerTimeout, func() bool {
				body = waitGet(t, peerTimeout, base+"/api/v1/targets?state=active", http.StatusOK, anyBody)
				var resp struct {
					Data struct {
						ActiveTargets []struct {
							ScrapePool string
							Health     string
						}
					}
				}
				if err := json.Unmarshal([]byte(body), &resp); err != nil {
					t.Fatalf("GET /api/v1/targets: %v", err)
				}
				for _, at := range resp.Data.ActiveTargets {
					if at.ScrapePool == "added" && at.Health == "up" {
						return true
					}
				}
				return false
			}, func() string { return "the added job's target is not up:\n" + excerpt(body) })
		},
		added:        "job_name: added",
		invalid:      "job_name: broken",
		fixed:        "job_name: fixed",
		lastReloadOK: "prometheus_config_last_reload_successful",
		// The reason, which Prometheus gives on the second line of its
		// answer: hotreload's log must carry it, not just the first line.
		refusal: "field scrape_intervall not found",
	})
}

// TestAlertmanagerReloadByWebhook is TestPrometheusReloadByWebhook for
// Debian's prometheus-alertmanager: a new receiver goes live, a route to an
// undefined receiver is refused, and a fixed configuration goes live.
func TestAlertmanagerReloadByWebhook(t *testing.T) {
	t.Parallel()
	testWebhookPeer(t, webhookPeer{
		name:    "prometheus-alertmanager",
		pkg:     "prometheus-alertmanager",
		file:    "alertmanager.yml",
		fixture: "alertmanager",
		args: func(addr, dir string) []string {
			return []string{
				"--web.listen-address=" + addr, "--storage.path=" + filepath.Join(dir, "data"),
				"--cluster.listen-address=", // no clustering, no other port
			}
		},
		configPath: "/api/v2/status",
		configured: func(t *testing.T, body, want string) bool {
			var resp struct {
				Config struct{ Original string }
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Config.Original == "" {
				t.Fatalf("GET /api/v2/status: %v, no config.original in %s", err, excerpt(body))
			}
			return strings.Contains(resp.Config.Original, want)
		},
		added:        "name: added",
		invalid:      "receiver: missing",
		fixed:        "name: fixed",
		lastReloadOK: "alertmanager_config_last_reload_successful",
		refusal:      `failed to reload config: undefined receiver \"missing\" used in route`,
	})
}

func testWebhookPeer(t *testing.T, app webhookPeer) {
	path := requirePeer(t, app.name, "/usr/bin", app.pkg)
	dir := t.TempDir()
	vol := kubelet.New(filepath.Join(dir, "vol"))
	addr := e2etest.FreeAddr(t)
	base := "http://" + addr
	data := map[string]string{"Self": addr} // and, from stage 2 on, "Hotreload": its address
	write := func(changed bool, stage string) {
		t.Helper()
		e2etest.Write(t, vol, changed, e2etest.Payload(app.file, fixture(t, app.fixture+"-"+stage+".yml", data)))
	}
	config := func() string {
		t.Helper()
		return waitGet(t, peerTimeout, base+app.configPath, http.StatusOK, anyBody)
	}
	waitConfigured := func(want string) {
		t.Helper()
		var body string
		poll.EventuallyMsg(t, peerTimeout, func() bool { body = config(); return app.configured(t, body, want) }, func() string {
			return fmt.Sprintf("%s does not run a configuration with %q:\n%s", app.name, want, excerpt(body))
		})
	}

	write(true, "1-initial")
	args := append([]string{"--config.file=" + filepath.Join(vol.Dir, app.file)}, app.args(addr, dir)...)
	peer := startPeer(t, app.name, exec.Command(path, args...))
	waitGet(t, peerStartTimeout, base+"/-/ready", http.StatusOK, anyBody)

	reloadURL := base + "/-/reload"
	hr := e2etest.StartWith(t, e2etest.Options{}, "--volume-dir="+vol.Dir, "--webhook-url="+reloadURL,
		"--debounce=0", "--webhook-max-backoff=500ms")
	hr.WaitReady(10 * time.Second)
	data["Hotreload"] = hr.Addr()
	target := map[string]string{"target": reloadURL}
	success := map[string]string{"target": reloadURL, "result": "success"}
	failure := map[string]string{"target": reloadURL, "result": "failure"}

	// A new job or receiver goes live.
	write(true, "2-added")
	waitConfigured(app.added)
	if app.live != nil {
		app.live(t, base)
	}
	waitMetric(t, hr, peerTimeout, "hotreload_reloads_total", success, equals(1))
	if v := metric(hr, "hotreload_last_reload_successful", target); v != 1 {
		t.Errorf("hotreload_last_reload_successful = %v, want 1", v)
	}
	if v := peerMetric(t, base+"/metrics", app.lastReloadOK); v != 1 {
		t.Errorf("%s = %v, want 1", app.lastReloadOK, v)
	}

	// An invalid configuration: the app refuses it with 500 and keeps the
	// old one; hotreload reports the failure, and retries.
	write(true, "3-invalid")
	waitMetric(t, hr, peerTimeout, "hotreload_reloads_total", failure, atLeast(1))
	waitMetric(t, hr, peerTimeout, "hotreload_last_reload_successful", target, equals(0))
	hr.WaitLog(peerTimeout, "level=warn", "reload failed", "target="+reloadURL, "status 500", app.refusal)
	peer.mustRun()
	if v := peerMetric(t, base+"/metrics", app.lastReloadOK); v != 0 {
		t.Errorf("%s = %v after the invalid configuration, want 0", app.lastReloadOK, v)
	}
	if body := config(); !app.configured(t, body, app.added) || app.configured(t, body, app.invalid) {
		t.Errorf("%s does not run its old configuration:\n%s", app.name, excerpt(body))
	}
	waitGet(t, peerTimeout, base+"/-/ready", http.StatusOK, anyBody)
	if v := metric(hr, "hotreload_reloads_total", success); v != 1 {
		t.Errorf("%v successful reloads, want still 1", v)
	}

	// A fixed configuration goes live: a rejected one does not stop
	// hotreload from reloading again.
	write(true, "4-fixed")
	waitConfigured(app.fixed)
	// A retry of the rejected configuration that falls between the
	// kubelet's swap and hotreload's hash of it reloads the app with the
	// fixed file (the app reads the files, not what hotreload meant), and
	// the fixed change is delivered after it all the same: hotreload cannot
	// know what the app read. Such a retry is one success more.
	poll.EventuallyMsg(t, peerTimeout, func() bool {
		return metric(hr, "hotreload_reloads_total", success) == 2+retriedOK(hr.Logs())
	}, func() string {
		return fmt.Sprintf("hotreload's reloads_total%v is %v, want 2 and one per successful retry (%v)",
			success, metric(hr, "hotreload_reloads_total", success), retriedOK(hr.Logs()))
	})
	waitMetric(t, hr, peerTimeout, "hotreload_last_reload_successful", target, equals(1))
	if v := peerMetric(t, base+"/metrics", app.lastReloadOK); v != 1 {
		t.Errorf("%s = %v after the fixed configuration, want 1", app.lastReloadOK, v)
	}
	peer.mustRun()
	hr.Stop()
}

var retriedRE = regexp.MustCompile(`msg=reloaded attempts=(\d+)`)

// retriedOK counts the reloads in log that succeeded on a retry.
func retriedOK(log string) float64 {
	var n float64
	for _, m := range retriedRE.FindAllStringSubmatch(log, -1) {
		if m[1] != "1" {
			n++
		}
	}
	return n
}
