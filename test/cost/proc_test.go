package cost

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
)

// buildFlags are the Makefile's release flags (GOBUILD): static, trimmed,
// stripped.
var buildFlags = []string{"build", "-trimpath", "-ldflags=-s -w"}

var built struct {
	once      sync.Once
	dir       string
	hotreload string
	floor     string
	err       error
}

// binaries builds hotreload and the floor program once per test binary, as
// the Makefile builds a release, and returns their paths.
func binaries(tb testing.TB) (hotreload, floor string) {
	tb.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "hotreload-cost-")
		if built.err != nil {
			return
		}
		for _, b := range []struct {
			out *string
			pkg string
		}{
			{&built.hotreload, "github.com/hotreload/hotreload/cmd/hotreload"},
			{&built.floor, "github.com/hotreload/hotreload/test/cost/floor"},
		} {
			*b.out = filepath.Join(built.dir, filepath.Base(b.pkg))
			cmd := exec.Command("go", append(buildFlags, "-o", *b.out, b.pkg)...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s: %w\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if built.err != nil {
		tb.Fatal(built.err)
	}
	return built.hotreload, built.floor
}

// proc is a running hotreload or floor process.
type proc struct {
	tb   testing.TB
	name string
	bin  string
	cmd  *exec.Cmd
	out  binary.Buffer
	addr string // hotreload's web address
}

// start runs bin with args and stops it (SIGTERM, then SIGKILL) at the end
// of the test.
func start(tb testing.TB, name, bin string, args ...string) *proc {
	tb.Helper()
	return run(tb, name, bin, exec.Command(bin, args...))
}

// run starts cmd, which runs bin, and stops it as start does.
func run(tb testing.TB, name, bin string, cmd *exec.Cmd) *proc {
	tb.Helper()
	p := &proc{tb: tb, name: name, bin: bin, cmd: cmd}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	})
	return p
}

var listeningRE = regexp.MustCompile(`\bmsg=listening address=(\S+)`)

// startHotreload runs the hotreload binary on dirs with a webhook to url
// and waits until GET /-/ready answers 200.
func startHotreload(tb testing.TB, bin, url string, dirs []string, extra ...string) *proc {
	tb.Helper()
	args := []string{"--web.listen-address=127.0.0.1:0", "--webhook-url=" + url}
	for _, d := range dirs {
		args = append(args, "--volume-dir="+d)
	}
	p := start(tb, "hotreload", bin, append(args, extra...)...)
	poll.Eventually(tb, time.Minute, func() bool {
		m := listeningRE.FindStringSubmatch(p.out.String())
		if m == nil {
			return false
		}
		p.addr = m[1]
		return p.get("/-/ready") == http.StatusOK
	}, "hotreload not ready:\n%s", &p.out)
	return p
}

// startFloor runs the floor program on dirs, with flags before them, and
// waits for its "ready" line.
func startFloor(tb testing.TB, bin, url string, dirs []string, flags ...string) *proc {
	tb.Helper()
	args := append(append([]string{"--url=" + url}, flags...), dirs...)
	p := start(tb, "floor", bin, args...)
	poll.Eventually(tb, time.Minute, func() bool { return strings.Contains(p.out.String(), "ready") },
		"floor not ready:\n%s", &p.out)
	return p
}

func (p *proc) get(path string) int {
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// metrics scrapes hotreload's /metrics and returns every sample without
// labels, by name.
func (p *proc) metrics() map[string]float64 {
	p.tb.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		p.tb.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = f
		}
	}
	return out
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// cpu returns the process's CPU time (utime+stime of /proc/PID/stat, in
// clock ticks of 10 ms) and the sum of its threads' run time from
// /proc/PID/task/*/schedstat (nanoseconds, for figures below a tick).
func (p *proc) cpu() (stat, sched time.Duration) {
	p.tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
	if err != nil {
		p.tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	stat = time.Duration(utime+stime) * 10 * time.Millisecond // CLK_TCK 100
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", p.pid()))
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil {
			if n, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64); err == nil {
				sched += time.Duration(n)
			}
		}
	}
	return stat, sched
}

// kib reads the "Name:  N kB" lines of a /proc file.
func kib(tb testing.TB, path string) map[string]float64 {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	out := make(map[string]float64)
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseFloat(f[0], 64)
			out[name] = n
		}
	}
	return out
}

// app is a webhook target that records when each request arrived.
type app struct {
	srv *httptest.Server
	mu  sync.Mutex
	at  []time.Time
}

func newApp(tb testing.TB) *app {
	a := &app{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		a.mu.Lock()
		a.at = append(a.at, now)
		a.mu.Unlock()
	}))
	tb.Cleanup(a.srv.Close)
	return a
}

func (a *app) url() string { return a.srv.URL + "/-/reload" }

func (a *app) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// waitCount waits until the app has had n requests and returns when the
// n-th arrived.
func (a *app) waitCount(tb testing.TB, n int) time.Time {
	tb.Helper()
	poll.Eventually(tb, time.Minute, func() bool { return a.count() >= n }, "request %d never came", n)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[n-1]
}

// cost prints a figure line for the lead to collect.
func cost(format string, args ...any) {
	fmt.Printf("COST: "+format+"\n", args...)
}
