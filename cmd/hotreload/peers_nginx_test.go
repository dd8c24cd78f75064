//go:build linux

package main_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// nginxWorkers is worker_processes in testdata/peers/nginx.conf.
const nginxWorkers = 2

// TestNginxReloadBySignal runs Debian's nginx, a master and two workers,
// with its server block in a volume written the kubelet's way, and hotreload
// with --signal=SIGHUP --process-name=nginx, both in a fresh PID namespace.
// A change is served after one reload, by the same master with new workers;
// re-writes that change no content reload nothing.
func TestNginxReloadBySignal(t *testing.T) {
	t.Parallel()
	nginxPath := requirePeer(t, "nginx", "/usr/sbin", "nginx-light")
	bin, inside := inPIDNamespace(t)
	if !inside {
		return
	}

	ng := startNginx(t, nginxPath)
	hr := e2etest.StartWith(t, e2etest.Options{Binary: bin},
		"--volume-dir="+ng.vol.Dir, "--signal=SIGHUP", "--process-name=nginx", "--debounce=0")
	hr.WaitReady(10 * time.Second)
	hr.WaitLog(5*time.Second, "msg=starting", "targets=signal:nginx")
	success := map[string]string{"target": "signal:nginx", "result": "success"}
	failure := map[string]string{"target": "signal:nginx", "result": "failure"}
	if n := metric(hr, "hotreload_reloads_total", nil); n != 0 {
		t.Fatalf("%v reloads before any change, want 0", n)
	}

	// A change: nginx serves it, from the same master and new workers.
	master := mustStat(t, ng.Pid())
	workers := ng.waitWorkers(t, nil)
	e2etest.Write(t, ng.vol, true, ng.payload("v2"))
	waitGet(t, peerTimeout, ng.url, http.StatusOK, func(b string) bool { return b == "v2\n" })
	waitMetric(t, hr, peerTimeout, "hotreload_reloads_total", success, equals(1))
	newWorkers := ng.waitWorkers(t, workers)
	ng.checkMaster(t, master)
	t.Logf("master %d kept; workers %v replaced by %v", master.PID, workers, newWorkers)
	// The counter goes up just before the log line is written.
	hr.WaitLog(peerTimeout, "msg=reloaded", "target=signal:nginx")
	if n := hr.CountLog("msg=reloaded", "target=signal:nginx"); n != 1 {
		t.Errorf("%d \"reloaded\" log lines for signal:nginx, want 1", n)
	}

	// Writes that change no content: the kubelet's identical update (which
	// writes nothing), fsGroup's mode changes, and a swap of ..data to a
	// new version directory with the same files. Each leaves inotify events
	// but no reload.
	//
	// Waiting for each one's events to be counted makes the watcher look
	// at it before the next write, so that a reload it wrongly caused
	// comes before the real change's, not merged into it. (A hash that is
	// still running when the next write lands can still merge them: a
	// wrong reload may then go unnoticed, but no correct run fails.)
	e2etest.Write(t, ng.vol, false, ng.payload("v2"))
	events := metric(hr, "hotreload_watch_events_total", nil)
	if err := ng.vol.Chmod(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, hr, peerTimeout, "hotreload_watch_events_total", nil, atLeast(events+1))
	events = metric(hr, "hotreload_watch_events_total", nil)
	swapIdentical(t, ng.vol.Dir)
	// At least 5 events on the root: mkdir, symlink, the rename as two,
	// the removal.
	waitMetric(t, hr, peerTimeout, "hotreload_watch_events_total", nil, atLeast(events+5))

	// The sync point: a real change makes exactly one more reload.
	e2etest.Write(t, ng.vol, true, ng.payload("v3"))
	waitGet(t, peerTimeout, ng.url, http.StatusOK, func(b string) bool { return b == "v3\n" })
	waitMetric(t, hr, peerTimeout, "hotreload_reloads_total", success, atLeast(2))
	ng.waitWorkers(t, newWorkers)
	ng.checkMaster(t, master)
	mfs := hr.Scrape()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"hotreload_reloads_total", success, 2},
		{"hotreload_reloads_total", failure, 0},
		{"hotreload_changes_total", nil, 2},
		{"hotreload_last_reload_successful", map[string]string{"target": "signal:nginx"}, 1},
	} {
		if got, _ := binary.Value(mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	hr.Stop()
}

// TestNginxSignalUnhandledTarget is the other side of the nginx test: a
// target that does not handle SIGHUP (sleep, which SIGHUP would kill) is
// not signalled. It stays alive, the failure shows in the metrics, and the
// log names --signal-force.
func TestNginxSignalUnhandledTarget(t *testing.T) {
	t.Parallel()
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep(1): %v", err)
	}
	bin, inside := inPIDNamespace(t)
	if !inside {
		return
	}

	// sleep under a name of its own (argv[0]), which --process-name
	// matches.
	const name = "hrpeer-nohup"
	target := startPeer(t, name, &exec.Cmd{Path: sleepPath, Args: []string{name, "1000"}})
	poll.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", target.Pid()))
		return err == nil && strings.HasPrefix(string(b), name+"\x00")
	}, "%s did not start", name)
	before := mustStat(t, target.Pid())

	vol := kubelet.New(filepath.Join(t.TempDir(), "vol"))
	e2etest.Write(t, vol, true, e2etest.Payload("app.conf", "v1\n"))
	hr := e2etest.StartWith(t, e2etest.Options{Binary: bin},
		"--volume-dir="+vol.Dir, "--signal=SIGHUP", "--process-name="+name, "--debounce=0",
		"--webhook-max-backoff=200ms")
	hr.WaitReady(10 * time.Second)

	e2etest.Write(t, vol, true, e2etest.Payload("app.conf", "v2\n"))
	labels := map[string]string{"target": "signal:" + name, "result": "failure"}
	// Two failed attempts: hotreload has looked at the target twice and
	// sent nothing either time, or the target would be dead by now.
	waitMetric(t, hr, peerTimeout, "hotreload_reloads_total", labels, atLeast(2))
	mfs := hr.Scrape()
	if v, ok := binary.Value(mfs, "hotreload_last_reload_successful", map[string]string{"target": "signal:" + name}); !ok || v != 0 {
		t.Errorf("hotreload_last_reload_successful = %v (found %v), want 0", v, ok)
	}
	if v, _ := binary.Value(mfs, "hotreload_reloads_total", map[string]string{"result": "success"}); v != 0 {
		t.Errorf("%v successful reloads, want 0", v)
	}
	target.mustRun()
	if after := mustStat(t, target.Pid()); after.Dead() || after.StartTime != before.StartTime {
		t.Errorf("target is not the same live process: before %+v, after %+v", before, after)
	}
	want := fmt.Sprintf("pid %d (sleep) does not handle SIGHUP and would be terminated by it", target.Pid())
	if hr.CountLog("reload failed", "target=signal:"+name, want, "--signal-force") == 0 {
		t.Errorf("no log line says %q and names --signal-force", want)
	}
	hr.Stop()
}

// nginx is a running nginx master, with its workers, serving the server
// block of a kubelet volume.
type nginx struct {
	*peer
	t    *testing.T
	vol  *kubelet.Volume
	addr string // host:port it listens on
	url  string // the location that returns the version
}

// startNginx starts nginx in the foreground (daemon off, so the test knows
// the master: it is the process started) with master_process on and two
// workers, and waits until it serves version v1 from both workers.
func startNginx(t *testing.T, path string) *nginx {
	t.Helper()
	dir := t.TempDir()
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(prefix, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	ng := &nginx{t: t, vol: kubelet.New(filepath.Join(dir, "vol")), addr: e2etest.FreeAddr(t)}
	ng.url = "http://" + ng.addr + "/version"
	e2etest.Write(t, ng.vol, true, ng.payload("v1"))
	conf := filepath.Join(prefix, "nginx.conf")
	data := fixture(t, "nginx.conf", map[string]string{"Prefix": prefix, "Volume": ng.vol.Dir})
	if err := os.WriteFile(conf, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	ng.peer = startPeer(t, "nginx", exec.Command(path, "-p", prefix+"/", "-c", conf))
	waitGet(t, peerStartTimeout, ng.url, http.StatusOK, func(b string) bool { return b == "v1\n" })
	ng.mustRun()
	return ng
}

// payload is the volume's content serving version v.
func (ng *nginx) payload(v string) map[string]kubelet.File {
	return e2etest.Payload("server.conf", fixture(ng.t, "nginx-server.conf", map[string]string{"Addr": ng.addr, "Version": v}))
}

// waitWorkers waits until the master has exactly its number of workers,
// none of them in old (the workers before a reload, which finish their
// connections and exit), and returns their pids.
func (ng *nginx) waitWorkers(t *testing.T, old []int) []int {
	t.Helper()
	var pids []int
	poll.EventuallyMsg(t, peerTimeout, func() bool {
		pids = pids[:0]
		for _, c := range children(t, ng.Pid()) {
			if c.Comm == "nginx" {
				pids = append(pids, c.PID)
			}
		}
		slices.Sort(pids)
		return len(pids) == nginxWorkers && !slices.ContainsFunc(pids, func(p int) bool { return slices.Contains(old, p) })
	}, func() string {
		return fmt.Sprintf("nginx workers %v, want %d new ones (old: %v)", pids, nginxWorkers, old)
	})
	return slices.Clone(pids)
}

// checkMaster fails the test unless the master is the same live process.
func (ng *nginx) checkMaster(t *testing.T, before procStat) {
	t.Helper()
	ng.mustRun()
	if now := mustStat(t, ng.Pid()); now.Dead() || now.StartTime != before.StartTime {
		t.Fatalf("nginx master is not the same live process: before %+v, now %+v", before, now)
	}
}

// swapIdentical publishes the volume's current files again in a new
// version directory, the way the kubelet swaps ..data, with nothing
// changed but the version directory's name: what a writer less careful
// than the kubelet (which writes nothing when nothing changed) does. A
// content hash that includes the version directory's name would see a
// change.
func swapIdentical(t *testing.T, dir string) {
	t.Helper()
	data := filepath.Join(dir, "..data")
	oldName, err := os.Readlink(data)
	if err != nil {
		t.Fatal(err)
	}
	newName := fmt.Sprintf("..%s.%d", time.Now().UTC().Format("2006_01_02_15_04_05"), time.Now().UnixNano()%1e9)
	if err := os.CopyFS(filepath.Join(dir, newName), os.DirFS(filepath.Join(dir, oldName))); err != nil {
		t.Fatalf("copy version directory: %v", err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(newName, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, data); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, oldName)); err != nil {
		t.Fatal(err)
	}
}
