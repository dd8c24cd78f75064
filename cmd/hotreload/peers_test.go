//go:build linux

package main_test

// End-to-end tests against real apps ("peers"): nginx reloaded by SIGHUP
// through a PID namespace (peers_nginx_test.go), Prometheus and Alertmanager
// reloaded by their /-/reload endpoint (peers_webhook_test.go), and the
// swap-to-signal benchmark (peers_bench_test.go). This file holds what they
// share: finding the peer, running a test inside a fresh PID namespace
// (e2etest.InPIDNamespace), starting and killing a peer process, free ports, the configuration
// fixtures of testdata/peers, and HTTP and /proc helpers.
//
// Every process a test starts listens on 127.0.0.1 only, keeps its state
// under the test's temp directory, and is killed when the test ends.

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/poll"
)

// envBinary, in a benchmark's PID namespace, is the release-built hotreload
// that the benchmark measures, built outside so that the inside does not
// build it again. Tests run the test binary as hotreload (e2etest.Start).
// The name does not start with HOTRELOAD_, which hotreload reads its flags
// from, since hotreload inherits the environment.
const envBinary = "PEERS_TEST_HOTRELOAD_BINARY"

// Timeouts. They bound waits that end as soon as their condition holds.
const (
	// peerStartTimeout bounds the wait for a peer to serve: Prometheus
	// 2.42 takes a few seconds to open its TSDB on a loaded machine.
	peerStartTimeout = 30 * time.Second
	// peerTimeout bounds the wait for a reload to show.
	peerTimeout = 30 * time.Second
)

// requirePeer returns the path of a peer's binary, looked up in PATH and
// then in dir (Debian puts nginx in /usr/sbin, which a user's PATH may
// lack), or skips (fails in CI) naming the Debian package to install.
func requirePeer(tb testing.TB, name, dir, pkg string) string {
	tb.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
		return p
	}
	e2etest.SkipOrFail(tb, "%s not installed: apt-get install %s", name, pkg)
	return ""
}

// inPIDNamespace runs the calling top-level test or benchmark inside a
// fresh PID namespace (see e2etest.InPIDNamespace) and returns inside=true
// there, with the hotreload binary to run: "" for a test, which runs the
// test binary as hotreload, and the release-built one for a benchmark.
// Outside it returns inside=false once the run inside is over: the caller
// returns.
func inPIDNamespace(tb testing.TB, extraEnv ...string) (hotreload string, inside bool) {
	tb.Helper()
	_, isBench := tb.(*testing.B)
	if isBench && os.Getenv(envBinary) == "" {
		extraEnv = append(extraEnv, envBinary+"="+e2etest.Release(tb))
	}
	if !e2etest.InPIDNamespace(tb, extraEnv...) {
		return "", false
	}
	if bin := os.Getenv(envBinary); isBench && bin == "" {
		tb.Fatalf("%s is not set", envBinary)
	}
	return os.Getenv(envBinary), true
}

// peer is a running peer process (nginx, Prometheus, a target).
type peer struct {
	tb   testing.TB
	name string
	cmd  *exec.Cmd
	out  binary.Buffer // stdout and stderr
	done chan struct{} // closed once the process has exited and been reaped
}

// startPeer starts cmd in its own process group. When the test ends the
// whole group is killed, and the peer's output is logged if the test
// failed.
func startPeer(tb testing.TB, name string, cmd *exec.Cmd) *peer {
	tb.Helper()
	p := &peer{tb: tb, name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if tb.Failed() {
			tb.Logf("%s %s\n--- output:\n%s", name, strings.Join(cmd.Args[1:], " "), e2etest.Indent(p.out.String()))
		}
	})
	return p
}

// Pid is the peer's process id.
func (p *peer) Pid() int { return p.cmd.Process.Pid }

// Running reports whether the peer has not exited.
func (p *peer) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// mustRun fails the test if the peer has exited.
func (p *peer) mustRun() {
	p.tb.Helper()
	if !p.Running() {
		p.tb.Fatalf("%s exited: %v", p.name, p.cmd.ProcessState)
	}
}

// fixture renders testdata/peers/name as a text/template with data.
func fixture(tb testing.TB, name string, data any) string {
	tb.Helper()
	tmpl, err := template.New(name).Option("missingkey=error").ParseFiles(filepath.Join("testdata", "peers", name))
	if err != nil {
		tb.Fatalf("fixture: %v", err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		tb.Fatalf("fixture %s: %v", name, err)
	}
	return b.String()
}

// waitGet waits until GET url answers status with a body for which ok
// returns true, and returns the body.
func waitGet(tb testing.TB, timeout time.Duration, url string, status int, ok func(body string) bool) string {
	tb.Helper()
	var (
		code int
		body string
		err  error
	)
	poll.EventuallyMsg(tb, timeout, func() bool {
		code, body, err = binary.Get(url)
		return err == nil && code == status && ok(body)
	}, func() string {
		return fmt.Sprintf("GET %s: status %d (want %d), %v, body:\n%s", url, code, status, err, excerpt(body))
	})
	return body
}

func anyBody(string) bool { return true }

func excerpt(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// scrape returns the metrics a peer exposes at url, parsed.
func scrape(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	code, body, err := binary.Get(url)
	if err != nil || code != http.StatusOK {
		tb.Fatalf("GET %s: status %d, %v", url, code, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		tb.Fatalf("parse %s: %v", url, err)
	}
	return mfs
}

// peerMetric is the value of a peer's metric (summed over series), failing
// the test if it has none.
func peerMetric(tb testing.TB, url, name string) float64 {
	tb.Helper()
	v, ok := binary.Value(scrape(tb, url), name, nil)
	if !ok {
		tb.Fatalf("%s has no metric %s", url, name)
	}
	return v
}

// metric is hotreload's metric name{labels}, 0 if it has no such series
// yet.
func metric(p *e2etest.Proc, name string, labels map[string]string) float64 {
	v, _ := p.Metric(name, labels)
	return v
}

// waitMetric waits until hotreload's metric name{labels} satisfies ok.
func waitMetric(tb testing.TB, p *e2etest.Proc, timeout time.Duration, name string, labels map[string]string, ok func(float64) bool) {
	tb.Helper()
	poll.EventuallyMsg(tb, timeout, func() bool { return ok(metric(p, name, labels)) }, func() string {
		return fmt.Sprintf("hotreload's %s%v is %v", name, labels, metric(p, name, labels))
	})
}

func equals(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool {
	return func(v float64) bool { return v >= want }
}

// procStat is what a test needs from /proc/<pid>/stat.
type procStat struct {
	PID, PPID int
	Comm      string
	State     byte
	StartTime uint64 // clock ticks after boot: with the pid, names one process
}

// Dead reports a zombie or dead process.
func (s procStat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// pid (comm) state ppid ... with comm free to hold spaces and ")".
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[closing+1:])) // state is field 3, so f[i] is field i+3
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: %q", pid, b)
	}
	s := procStat{PID: pid, Comm: string(b[open+1 : closing]), State: f[0][0]}
	if s.PPID, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("parse ppid of %d: %w", pid, err)
	}
	if s.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("parse start time of %d: %w", pid, err)
	}
	return s, nil
}

// mustStat is readStat that fails the test.
func mustStat(tb testing.TB, pid int) procStat {
	tb.Helper()
	s, err := readStat(pid)
	if err != nil {
		tb.Fatalf("read /proc/%d/stat: %v", pid, err)
	}
	return s
}

// children lists the live processes whose parent is ppid.
func children(tb testing.TB, ppid int) []procStat {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	var kids []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := readStat(pid)
		if err != nil || s.PPID != ppid || s.Dead() {
			continue // gone meanwhile, or not a child
		}
		kids = append(kids, s)
	}
	return kids
}
