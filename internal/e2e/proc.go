package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logfmt/logfmt"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Timeouts of the harness's own waits. They are upper bounds, not delays: a
// wait ends as soon as its condition holds.
const (
	// StartTimeout bounds the wait for the binary to say where it listens.
	StartTimeout = 10 * time.Second
	// StopTimeout bounds the wait for the binary to exit after SIGTERM; it
	// is longer than the default --shutdown-grace of 10s.
	StopTimeout = 15 * time.Second
)

// client talks to hotreload's endpoints and the apps of the tests. Keep-alives
// are off so that no idle connection (and its goroutines) outlives a test, or
// pins an nginx worker that is shutting down.
var client = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// Buffer is an io.Writer safe for concurrent use that keeps everything
// written to it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Proc is a running hotreload binary.
type Proc struct {
	tb   testing.TB
	cmd  *exec.Cmd
	addr string // host:port of the web endpoints

	stdout, stderr Buffer

	done    chan struct{} // closed when the process has exited
	waitErr error         // cmd.Wait's error, set before done is closed
}

// Options tune Start. The zero value runs the binary of Binary with no
// extra environment.
type Options struct {
	// Binary is the path to run; "" means Binary(tb).
	Binary string
	// Env is added to the environment of the process.
	Env []string
	// Stderr, if set, also receives everything the process writes to
	// stderr (for showing the logs live, as the demo does).
	Stderr io.Writer
}

// Start runs hotreload with args and returns once it serves its endpoints.
// Unless args set --web.listen-address, it listens on 127.0.0.1 with a port
// chosen by the kernel, learnt from its "listening" log line. The process is
// killed when the test ends if it still runs, and its logs are written to
// the test log if the test failed.
func Start(tb testing.TB, args ...string) *Proc {
	tb.Helper()
	return StartWith(tb, Options{}, args...)
}

// StartWith is Start with options.
func StartWith(tb testing.TB, opts Options, args ...string) *Proc {
	tb.Helper()
	if opts.Binary == "" {
		opts.Binary = Binary(tb)
	}
	addr := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			addr = v
		}
	}
	if addr == "" {
		args = append(args, "--web.listen-address=127.0.0.1:0")
	}
	p := &Proc{tb: tb, done: make(chan struct{})}
	p.cmd = exec.Command(opts.Binary, args...)
	p.cmd.Env = append(os.Environ(), opts.Env...)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if opts.Stderr != nil {
		p.cmd.Stderr = io.MultiWriter(&p.stderr, opts.Stderr)
	}
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start hotreload: %v", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		if p.Running() {
			p.cmd.Process.Kill()
			<-p.done
		}
		if tb.Failed() {
			tb.Logf("hotreload %s\n--- stderr:\n%s--- stdout:\n%s", strings.Join(args, " "), p.Logs(), p.stdout.String())
		}
	})

	// Wait for the "listening" line, which carries the port; with an
	// explicit address (and a log level that hides that line) a GET
	// /-/healthy that answers tells the same.
	explicit := addr
	if !Poll(StartTimeout, func() bool {
		if a := listenAddress(p.Logs()); a != "" {
			addr = a
			return true
		}
		if explicit != "" && !strings.HasSuffix(explicit, ":0") {
			p.addr = loopback(explicit)
			if p.Status("/-/healthy") == http.StatusOK {
				return true
			}
		}
		return !p.Running()
	}) || !p.Running() {
		tb.Fatalf("hotreload did not start listening within %s (running: %v)", StartTimeout, p.Running())
	}
	p.addr = loopback(addr)
	return p
}

// loopback replaces an unspecified host (":9533", "0.0.0.0:9533") with
// 127.0.0.1.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (host == "" || host == "::" || host == "0.0.0.0") {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

var listeningRE = regexp.MustCompile(`\bmsg=listening address=(\S+)`)

// listenAddress finds the address in the web server's "listening" log
// line, in logfmt or JSON.
func listenAddress(logs string) string {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "listening") {
			continue
		}
		if m := listeningRE.FindStringSubmatch(line); m != nil {
			return strings.Trim(m[1], `"`)
		}
		// JSON keys are sorted, so look the address up by key.
		if i := strings.Index(line, `"address":"`); i >= 0 && strings.Contains(line, `"msg":"listening"`) {
			rest := line[i+len(`"address":"`):]
			if j := strings.IndexByte(rest, '"'); j > 0 {
				return rest[:j]
			}
		}
	}
	return ""
}

// Addr is the host:port of the endpoints.
func (p *Proc) Addr() string { return p.addr }

// URL is the URL of path on the endpoints.
func (p *Proc) URL(path string) string { return "http://" + p.addr + path }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Logs returns what the process wrote to stderr so far.
func (p *Proc) Logs() string { return p.stderr.String() }

// Stdout returns what the process wrote to stdout so far.
func (p *Proc) Stdout() string { return p.stdout.String() }

// CountLog counts the log lines that contain every one of substrs.
func (p *Proc) CountLog(substrs ...string) int {
	n := 0
	for _, line := range strings.Split(p.Logs(), "\n") {
		if containsAll(line, substrs) {
			n++
		}
	}
	return n
}

func containsAll(s string, substrs []string) bool {
	if s == "" {
		return false
	}
	for _, sub := range substrs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// WaitLog waits until a log line contains every one of substrs and fails
// the test if none does within timeout.
func (p *Proc) WaitLog(timeout time.Duration, substrs ...string) {
	p.tb.Helper()
	Eventually(p.tb, timeout, func() bool { return p.CountLog(substrs...) > 0 },
		"no log line with %q", substrs)
}

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Get requests path on the endpoints and returns the status code and body.
func (p *Proc) Get(path string) (int, string, error) { return Get(p.URL(path)) }

// Get requests url and returns the status code and body.
func Get(url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Status returns the status code of GET path, or 0 if the request failed.
func (p *Proc) Status(path string) int {
	code, _, _ := p.Get(path)
	return code
}

// WaitReady waits until GET /-/ready answers 200.
func (p *Proc) WaitReady(timeout time.Duration) {
	p.tb.Helper()
	Eventually(p.tb, timeout, func() bool { return p.Status("/-/ready") == http.StatusOK },
		"GET /-/ready never answered 200")
}

// Scrape returns the metrics exposed at /metrics, parsed.
func (p *Proc) Scrape() map[string]*dto.MetricFamily {
	p.tb.Helper()
	return p.ScrapePath("/metrics")
}

// ScrapePath returns the metrics exposed at path, parsed. It fails the test
// if they cannot be read.
func (p *Proc) ScrapePath(path string) map[string]*dto.MetricFamily {
	p.tb.Helper()
	mfs, err := Scrape(p.URL(path))
	if err != nil {
		p.tb.Fatal(err)
	}
	return mfs
}

// Scrape returns the metrics exposed at url, parsed.
func Scrape(url string) (map[string]*dto.MetricFamily, error) {
	code, body, err := Get(url)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	return mfs, nil
}

// Metric returns the sum of the samples of the metric family name whose
// labels include labels (nil matches every series), and whether there was
// at least one. A histogram or summary counts its observations.
func (p *Proc) Metric(name string, labels map[string]string) (float64, bool) {
	p.tb.Helper()
	return Value(p.Scrape(), name, labels)
}

// MustMetric is Metric that fails the test if no series matches.
func (p *Proc) MustMetric(name string, labels map[string]string) float64 {
	p.tb.Helper()
	v, ok := p.Metric(name, labels)
	if !ok {
		p.tb.Fatalf("no metric %s%v", name, labels)
	}
	return v
}

// Value is Metric over metrics already scraped.
func Value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	var (
		sum   float64
		found bool
	)
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		}
	}
	return sum, found
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) {
	p.tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.tb.Fatalf("signal hotreload: %v", err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code, or -1 with an error if it still runs or was killed by a signal.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return -1, fmt.Errorf("still running after %s", timeout)
	}
	return exitCode(p.waitErr)
}

func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, fmt.Errorf("killed by %v", ws.Signal())
		}
		return ee.ExitCode(), nil
	}
	return -1, err
}

// Stop sends SIGTERM and fails the test unless the process exits with code
// 0 within StopTimeout. It returns how long the exit took.
func (p *Proc) Stop() time.Duration {
	p.tb.Helper()
	start := time.Now()
	p.Signal(syscall.SIGTERM)
	code, err := p.Wait(StopTimeout)
	took := time.Since(start)
	if err != nil || code != 0 {
		p.tb.Fatalf("after SIGTERM: exit code %d, %v", code, err)
	}
	return took
}

// Result is the outcome of a run that is expected to end by itself.
type Result struct {
	Code           int
	Stdout, Stderr string
	Took           time.Duration
}

// Run runs hotreload with args, expecting it to exit by itself within
// timeout (a bad command line, --version); it fails the test if it does
// not.
func Run(tb testing.TB, timeout time.Duration, args ...string) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(tb), args...)
	var stdout, stderr Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
	if ctx.Err() != nil {
		tb.Fatalf("hotreload %s: still running after %s; stderr:\n%s", strings.Join(args, " "), timeout, r.Stderr)
	}
	r.Code, err = exitCode(err)
	if err != nil {
		tb.Fatalf("hotreload %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// Memory is the memory use of a process, in bytes, from /proc/<pid>/status.
type Memory struct {
	RSS  int64 // VmRSS: resident now
	HWM  int64 // VmHWM: the peak of RSS
	Anon int64 // RssAnon: heap, stacks, runtime (the Go part)
	File int64 // RssFile: pages of the binary mapped in
}

// Memory reads the process's memory use.
func (p *Proc) Memory() (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.HWM, "RssAnon": &m.Anon, "RssFile": &m.File}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		dst := fields[key]
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(val) // "10740 kB"
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("parse %q", line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("parse %s: %w", key, err)
		}
		*dst = n << 10
	}
	if m.RSS == 0 {
		return Memory{}, errors.New("no VmRSS in /proc status")
	}
	return m, nil
}

// FiredMsg is the reloader's log message for each reload it starts.
const FiredMsg = "content changed, reloading"

// Fire is one reload that the reloader started, from its log line.
type Fire struct {
	Time time.Time
	Dirs []string // the volumes whose changes it covers
}

// Fires returns the reloads started so far, in order, parsed from the
// logfmt log lines with FiredMsg.
func (p *Proc) Fires() []Fire {
	var fires []Fire
	d := logfmt.NewDecoder(strings.NewReader(p.Logs()))
	for d.ScanRecord() {
		var (
			f     Fire
			fired bool
		)
		for d.ScanKeyval() {
			switch v := string(d.Value()); string(d.Key()) {
			case "msg":
				fired = v == FiredMsg
			case "ts":
				f.Time, _ = time.Parse(time.RFC3339Nano, v)
			case "dirs":
				f.Dirs = strings.Split(v, ",")
			}
		}
		if fired {
			fires = append(fires, f)
		}
	}
	return fires
}
