package binary

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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logfmt/logfmt"

	"github.com/hotreload/hotreload/test/support/poll"
)

// Timeouts of the waits of Start and Stop. They are upper bounds, not
// delays: a wait ends as soon as its condition holds.
const (
	// StartTimeout bounds the wait for the binary to say where it listens.
	StartTimeout = 10 * time.Second
	// StopTimeout bounds the wait for the binary to exit after SIGTERM; it
	// is longer than the default --shutdown-grace of 10s.
	StopTimeout = 15 * time.Second
)

// Buffer is an io.Writer safe for concurrent use that keeps everything
// written to it: a process's output here, and the log a test captures
// from the code it runs in goroutines (the tests' one locked buffer).
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

// Options tune Start.
type Options struct {
	// Env is added to the environment of the process.
	Env []string
	// Stderr, if set, also receives everything the process writes to
	// stderr, such as the demo showing the logs as they come.
	Stderr io.Writer
}

// Process is a running hotreload.
type Process struct {
	Args []string // the command line, without the binary

	cmd    *exec.Cmd
	addr   string // host:port of the web endpoints
	stdout Buffer
	stderr Buffer

	done    chan struct{} // closed when the process has exited
	waitErr error         // cmd.Wait's error, set before done is closed
}

// Start runs the hotreload binary bin with args and returns once it serves
// its endpoints. Unless args set --web.listen-address, it listens on
// 127.0.0.1 with a port chosen by the kernel, learnt from its "listening"
// log line. If it does not start, it is killed and the error has its logs.
func Start(bin string, opts Options, args ...string) (*Process, error) {
	addr := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			addr = v
		}
	}
	if addr == "" {
		args = append(args, "--web.listen-address=127.0.0.1:0")
	}
	p := &Process{Args: args, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), opts.Env...)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if opts.Stderr != nil {
		p.cmd.Stderr = io.MultiWriter(&p.stderr, opts.Stderr)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start hotreload: %w", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()

	// Wait for the "listening" line, which carries the port; with an
	// explicit address (and a log level that hides that line) a GET
	// /-/healthy that answers tells the same.
	explicit := addr
	if !poll.Until(StartTimeout, func() bool {
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
		running := p.Running()
		p.Kill()
		return nil, fmt.Errorf("hotreload did not start listening within %s (running: %v); stderr:\n%s", StartTimeout, running, p.Logs())
	}
	p.addr = loopback(addr)
	return p, nil
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
func (p *Process) Addr() string { return p.addr }

// URL is the URL of path on the endpoints.
func (p *Process) URL(path string) string { return "http://" + p.addr + path }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Logs returns what the process wrote to stderr so far.
func (p *Process) Logs() string { return p.stderr.String() }

// Stdout returns what the process wrote to stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// CountLog counts the log lines that contain every one of substrs.
func (p *Process) CountLog(substrs ...string) int {
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

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Get requests path on the endpoints and returns the status code and body.
func (p *Process) Get(path string) (int, string, error) { return Get(p.URL(path)) }

// Status returns the status code of GET path, or 0 if the request failed.
func (p *Process) Status(path string) int {
	code, _, _ := p.Get(path)
	return code
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal hotreload: %w", err)
	}
	return nil
}

// Kill kills the process if it still runs, and waits until it has exited.
func (p *Process) Kill() {
	if p.Running() {
		p.cmd.Process.Kill()
	}
	<-p.done
}

// Wait waits up to timeout for the process to exit and returns its exit
// code, or -1 with an error if it still runs or was killed by a signal.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return -1, fmt.Errorf("still running after %s", timeout)
	}
	return exitCode(p.waitErr)
}

// Stop sends SIGTERM and waits up to StopTimeout for the exit code, which
// is an error unless it is 0. It returns how long the exit took.
func (p *Process) Stop() (time.Duration, error) {
	start := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	code, err := p.Wait(StopTimeout)
	took := time.Since(start)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit code %d", code)
	}
	if err != nil {
		return took, fmt.Errorf("after SIGTERM: %w", err)
	}
	return took, nil
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

// Result is the outcome of a run that is expected to end by itself.
type Result struct {
	Code           int
	Stdout, Stderr string
	Took           time.Duration
}

// Run runs the hotreload binary bin with args and the extra environment
// env, expecting it to exit by itself within timeout (a bad command line,
// --version). It is an error if it does not, or if it is killed.
func Run(bin string, env []string, timeout time.Duration, args ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
	if ctx.Err() != nil {
		return r, fmt.Errorf("hotreload %s: still running after %s; stderr:\n%s", strings.Join(args, " "), timeout, r.Stderr)
	}
	if r.Code, err = exitCode(err); err != nil {
		return r, fmt.Errorf("hotreload %s: %w", strings.Join(args, " "), err)
	}
	return r, nil
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
func (p *Process) Fires() []Fire {
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
