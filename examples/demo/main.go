// Command demo shows hotreload at work on any machine with Go, without a
// cluster: it plays the kubelet writing a ConfigMap volume (v1, v2, v3, and
// noise that changes no content), runs a small app that prints its config
// when told to reload, and runs the real hotreload binary between them.
// It ends by itself, and fails (exit 1) if an expected reload does not come.
//
//	make demo    # or: go run ./examples/demo
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hotreload/hotreload/internal/e2e"
	"github.com/hotreload/hotreload/internal/kubelet"
)

// deadline bounds every wait of the demo; each ends as soon as what it
// waits for happens.
const deadline = 10 * time.Second

func main() {
	if err := run(); err != nil {
		say("\nDEMO FAILED: %v", err)
		os.Exit(1)
	}
}

// out serializes the demo's lines with the hotreload logs that arrive
// concurrently.
var out sync.Mutex

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

func step(n int, format string, args ...any) {
	say("\n%d. "+format, append([]any{n}, args...)...)
}

func run() error {
	tmp, err := os.MkdirTemp("", "hotreload-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	say("hotreload demo: the kubelet, an app, and hotreload between them (working in %s)", tmp)

	say("\nBuilding hotreload...")
	bin, err := e2e.Build(tmp, "demo")
	if err != nil {
		return err
	}

	// 1. The kubelet populates the volume before any container starts.
	volDir := filepath.Join(tmp, "etc-config")
	vol := kubelet.New(volDir)
	v1 := map[string]kubelet.File{
		"greeting": {Data: []byte("hello")},
		"color":    {Data: []byte("blue")},
	}
	step(1, "The kubelet writes the ConfigMap volume v1 (greeting: hello, color: blue) before the pod starts.")
	if _, err := vol.Write(v1); err != nil {
		return err
	}
	showLayout(volDir)

	// 2. The app starts and reads its config.
	step(2, "The app starts and reads its config from the volume.")
	app, err := startApp(volDir)
	if err != nil {
		return err
	}
	defer app.close()
	say("   [app] started on %s with config: %s", app.addr, app.current())

	// 3. hotreload starts as the sidecar.
	args := []string{
		"--volume-dir=" + volDir,
		"--webhook-url=http://" + app.addr + "/-/reload",
		"--debounce=100ms",
		"--web.listen-address=127.0.0.1:0",
	}
	step(3, "hotreload starts as the sidecar:\n   hotreload %s", strings.Join(args, " "))
	hr, err := startHotreload(bin, args)
	if err != nil {
		return err
	}
	defer hr.kill()
	if !e2e.Poll(deadline, func() bool { return hr.status("/-/ready") == http.StatusOK }) {
		return fmt.Errorf("GET /-/ready did not answer 200 within %s", deadline)
	}
	say("   GET http://%s/-/ready = 200: every volume is hashed and watched.", hr.addr)

	// 4. An update.
	step(4, "The kubelet updates the volume to v2 (color: blue -> green): it writes a new\n"+
		"   ..<timestamp> directory, then renames ..data over the old link in one atomic step.")
	v2 := map[string]kubelet.File{
		"greeting": {Data: []byte("hello")},
		"color":    {Data: []byte("green")},
	}
	if err := update(vol, v2, true); err != nil {
		return err
	}
	t0 := time.Now()
	cfg, err := app.waitReload(1)
	if err != nil {
		return fmt.Errorf("step 4: %w", err)
	}
	took := time.Since(t0)
	if err := hr.waitLogged(1); err != nil {
		return fmt.Errorf("step 4: %w", err)
	}
	say("   -> the app reloaded %s after the swap; it now runs with: %s", took.Round(time.Millisecond), cfg)

	// 5. An identical re-write.
	step(5, "The kubelet syncs the same ConfigMap again (its periodic resync): the bytes are\n"+
		"   identical, so it writes nothing at all.")
	if err := update(vol, v2, false); err != nil {
		return err
	}
	say("   -> no filesystem event, nothing for hotreload to do; the config is still: %s", app.current())

	// 6. Noise: chmod only.
	step(6, "fsGroup noise: the kubelet changes the mode of every file and directory (3 times),\n"+
		"   which makes filesystem events but changes no content.")
	events := hr.metric("hotreload_watch_events_total")
	for range 3 {
		if err := vol.Chmod(); err != nil {
			return err
		}
	}
	if !e2e.Poll(deadline, func() bool { return hr.metric("hotreload_watch_events_total") > events }) {
		return errors.New("step 6: hotreload saw no event from the chmods")
	}
	say("   -> hotreload got %.0f filesystem events; it hashes content, not events, so no reload\n"+
		"      (the next step checks that: the app's next reload is its 2nd, not its 3rd).",
		hr.metric("hotreload_watch_events_total")-events)

	// 7. A bigger update.
	step(7, "The kubelet updates the volume to v3: greeting changes, the key color vanishes,\n"+
		"   and an item with a nested path (conf.d/app.yaml) appears.")
	v3 := map[string]kubelet.File{
		"greeting":        {Data: []byte("bonjour")},
		"conf.d/app.yaml": {Data: []byte("workers: 4")},
	}
	if err := update(vol, v3, true); err != nil {
		return err
	}
	cfg, err = app.waitReload(2)
	if err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	if err := hr.waitLogged(2); err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	if n := app.reloads(); n != 2 {
		return fmt.Errorf("step 7: the app was reloaded %d times, want 2: the noise of steps 5 and 6 reloaded it", n)
	}
	say("   -> reload #2 (so steps 5 and 6 reloaded nothing); the app now runs with: %s", cfg)
	showLayout(volDir)

	// 8. Metrics.
	step(8, "hotreload's metrics (GET http://%s/metrics, hotreload_* only):", hr.addr)
	if err := hr.showMetrics(); err != nil {
		return err
	}

	// 9. Shutdown.
	step(9, "The pod stops: SIGTERM to hotreload.")
	code, err := hr.stop()
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("hotreload exited with code %d, want 0", code)
	}
	say("   -> hotreload exited with code 0.")
	say("\nDemo complete: 2 updates, 2 reloads; an identical re-write and chmod noise, no reload.")
	return nil
}

// update writes payload as the kubelet and checks whether it wrote.
func update(vol *kubelet.Volume, payload map[string]kubelet.File, wantChanged bool) error {
	changed, err := vol.Write(payload)
	if err != nil {
		return fmt.Errorf("kubelet write: %w", err)
	}
	if changed != wantChanged {
		return fmt.Errorf("kubelet write: changed=%v, want %v", changed, wantChanged)
	}
	return nil
}

// showLayout prints the volume's root as ls -l would show it.
func showLayout(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		say("   (cannot list %s: %v)", dir, err)
		return
	}
	var lines []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch target, err := os.Readlink(p); {
		case err == nil:
			lines = append(lines, fmt.Sprintf("%s -> %s", e.Name(), target))
		case e.IsDir():
			lines = append(lines, e.Name()+"/")
		default:
			lines = append(lines, e.Name())
		}
	}
	say("   %s/\n     %s", dir, strings.Join(lines, "\n     "))
}

// app is the demo app: it reads its config from the volume at start and
// whenever POST /-/reload is called, and prints it.
type app struct {
	dir  string
	addr string
	srv  *http.Server

	mu     sync.Mutex
	config string
	count  int
}

func startApp(dir string) (*app, error) {
	a := &app{dir: dir}
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	a.config = cfg
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /-/reload", a.reload)
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go a.srv.Serve(ln)
	return a, nil
}

func (a *app) reload(w http.ResponseWriter, r *http.Request) {
	cfg, err := readConfig(a.dir)
	if err != nil {
		say("   [app] reload failed: %v", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	a.mu.Lock()
	a.count++
	n := a.count
	a.config = cfg
	a.mu.Unlock()
	say("   [app] %s %s #%d: config is now: %s", r.Method, r.URL.Path, n, cfg)
	fmt.Fprintln(w, "reloaded")
}

func (a *app) current() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.config
}

func (a *app) reloads() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// waitReload waits until the app has been reloaded n times and returns its
// config.
func (a *app) waitReload(n int) (string, error) {
	if !e2e.Poll(deadline, func() bool { return a.reloads() >= n }) {
		return "", fmt.Errorf("the app was not reloaded within %s (reloads: %d, want %d)", deadline, a.reloads(), n)
	}
	return a.current(), nil
}

func (a *app) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a.srv.Shutdown(ctx)
}

// readConfig reads the volume as an app does, through its visible names
// (skipping the kubelet's ..-prefixed entries and following its links),
// and returns "key=value" pairs, sorted.
func readConfig(root string) (string, error) {
	var pairs []string
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue
			}
			p, key := filepath.Join(dir, e.Name()), joinKey(rel, e.Name())
			info, err := os.Stat(p) // follows the kubelet's links
			if err != nil {
				return err
			}
			if info.IsDir() {
				if err := walk(p, key); err != nil {
					return err
				}
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			pairs = append(pairs, key+"="+strings.TrimSpace(string(b)))
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return "", fmt.Errorf("read config: %w", err)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ", "), nil
}

func joinKey(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// hotreload is the running binary, its logs shown as they come.
type hotreload struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	err  error

	mu       sync.Mutex
	reloaded int // log lines saying a target was reloaded
}

func startHotreload(bin string, args []string) (*hotreload, error) {
	h := &hotreload{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	stderr, err := h.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	listening := make(chan string, 1)
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		h.showLogs(stderr, listening)
	}()
	go func() {
		<-logsDone // Wait closes the pipe: read it all first
		h.err = h.cmd.Wait()
		close(h.done)
	}()
	select {
	case h.addr = <-listening:
		return h, nil
	case <-h.done:
		return nil, fmt.Errorf("hotreload exited at start: %v", h.err)
	case <-time.After(deadline):
		h.kill()
		return nil, fmt.Errorf("hotreload did not start listening within %s", deadline)
	}
}

// showLogs prints every log line with a prefix, counts the reloads, and
// sends the address of the "listening" line.
func (h *hotreload) showLogs(r io.Reader, listening chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		say("   [hotreload] %s", line)
		if strings.Contains(line, " msg=reloaded ") {
			h.mu.Lock()
			h.reloaded++
			h.mu.Unlock()
		}
		if _, rest, ok := strings.Cut(line, "msg=listening address="); ok {
			addr, _, _ := strings.Cut(rest, " ")
			select {
			case listening <- addr:
			default:
			}
		}
	}
}

// waitLogged waits until hotreload has logged n reloads, so that its log
// lines come before the demo's summary of a step.
func (h *hotreload) waitLogged(n int) error {
	if !e2e.Poll(deadline, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.reloaded >= n
	}) {
		return fmt.Errorf("hotreload did not log reload #%d within %s", n, deadline)
	}
	return nil
}

func (h *hotreload) get(path string) (int, string, error) { return e2e.Get("http://" + h.addr + path) }

func (h *hotreload) status(path string) int {
	code, _, _ := h.get(path)
	return code
}

// metric returns the value of an unlabelled metric, or -1.
func (h *hotreload) metric(name string) float64 {
	_, body, err := h.get("/metrics")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

func (h *hotreload) showMetrics() error {
	code, body, err := h.get("/metrics")
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("GET /metrics: %d %v", code, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "hotreload_") && !strings.Contains(line, "_bucket{") {
			say("   %s", line)
		}
	}
	return nil
}

// stop sends SIGTERM and returns the exit code.
func (h *hotreload) stop() (int, error) {
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return -1, err
	}
	select {
	case <-h.done:
	case <-time.After(15 * time.Second):
		h.kill()
		return -1, errors.New("hotreload did not exit within 15s of SIGTERM")
	}
	var ee *exec.ExitError
	switch {
	case h.err == nil:
		return 0, nil
	case errors.As(h.err, &ee):
		return ee.ExitCode(), nil
	default:
		return -1, h.err
	}
}

func (h *hotreload) kill() {
	select {
	case <-h.done:
	default:
		h.cmd.Process.Kill()
		<-h.done
	}
}
