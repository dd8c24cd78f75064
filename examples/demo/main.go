// Command demo shows hotreload at work on any machine with Go, without a
// cluster: it plays the kubelet writing a ConfigMap volume (v1, v2, v3, and
// noise that changes no content), runs a small app that prints its config
// when told to reload, and runs the real hotreload binary between them.
// It ends by itself, and fails (exit 1) if an expected reload does not come.
//
//	make demo    # or: go run ./examples/demo
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
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

// The contents of the volume, one per update.
var (
	v1 = map[string]kubelet.File{"greeting": {Data: []byte("hello")}, "color": {Data: []byte("blue")}}
	v2 = map[string]kubelet.File{"greeting": {Data: []byte("hello")}, "color": {Data: []byte("green")}}
	v3 = map[string]kubelet.File{"greeting": {Data: []byte("bonjour")}, "conf.d/app.yaml": {Data: []byte("workers: 4")}}
)

// demo is what the steps share: the volume, the app and hotreload.
type demo struct {
	bin string // the hotreload binary
	vol *kubelet.Volume
	app *app
	hr  *binary.Process
}

func run() error {
	tmp, err := os.MkdirTemp("", "hotreload-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	say("hotreload demo: the kubelet, an app, and hotreload between them (working in %s)", tmp)

	say("\nBuilding hotreload...")
	// No revision: go build records the commit (unless -buildvcs=false),
	// which the logs and hotreload_build_info then show.
	d := &demo{vol: kubelet.New(filepath.Join(tmp, "etc-config"))}
	if d.bin, err = binary.Build(tmp, "demo", ""); err != nil {
		return err
	}
	defer d.close()

	steps := []struct {
		title string
		do    func() error
	}{
		{"The kubelet writes the ConfigMap volume v1 (greeting: hello, color: blue) before the pod starts.", d.populate},
		{"The app starts and reads its config from the volume.", d.startApp},
		{"hotreload starts as the sidecar.", d.startHotreload},
		{"The kubelet updates the volume to v2 (color: blue -> green): it writes a new\n" +
			"   ..<timestamp> directory, then renames ..data over the old link in one atomic step.", d.update},
		{"An identical re-write: a new ..<timestamp> directory with the same bytes, swapped in\n" +
			"   as ..data. (The kubelet itself writes nothing when the bytes are identical; the demo\n" +
			"   forces the swap to show hotreload's own content check.)", d.identicalRewrite},
		{"fsGroup noise: the kubelet changes the mode of every file and directory (3 times),\n" +
			"   which makes filesystem events but changes no content.", d.chmodNoise},
		{"The kubelet updates the volume to v3: greeting changes, the key color vanishes,\n" +
			"   and an item with a nested path (conf.d/app.yaml) appears.", d.biggerUpdate},
		{"hotreload's metrics (GET /metrics, hotreload_* only):", d.showMetrics},
		{"The pod stops: SIGTERM to hotreload.", d.stop},
	}
	for i, s := range steps {
		say("\n%d. %s", i+1, s.title)
		if err := s.do(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	say("\nDemo complete: 2 updates, 2 reloads; an identical re-write and chmod noise, no reload.")
	return nil
}

func (d *demo) close() {
	if d.hr != nil {
		d.hr.Kill()
	}
	if d.app != nil {
		d.app.close()
	}
}

// populate writes v1, as the kubelet does before any container starts.
func (d *demo) populate() error {
	if err := update(d.vol, v1, true); err != nil {
		return err
	}
	showLayout(d.vol.Dir)
	return nil
}

func (d *demo) startApp() error {
	var err error
	if d.app, err = startApp(d.vol.Dir); err != nil {
		return err
	}
	say("   [app] started on %s with config: %s", d.app.addr, d.app.current())
	return nil
}

func (d *demo) startHotreload() error {
	args := []string{
		"--volume-dir=" + d.vol.Dir,
		"--webhook-url=http://" + d.app.addr + "/-/reload",
		"--debounce=100ms",
		"--web.listen-address=127.0.0.1:0",
	}
	say("   hotreload %s", strings.Join(args, " "))
	var err error
	if d.hr, err = binary.Start(d.bin, binary.Options{Stderr: &prefixLines{prefix: "   [hotreload] "}}, args...); err != nil {
		return err
	}
	if !poll.Until(deadline, func() bool { return d.hr.Status("/-/ready") == http.StatusOK }) {
		return fmt.Errorf("GET /-/ready did not answer 200 within %s", deadline)
	}
	say("   GET %s = 200: every volume is hashed and watched.", d.hr.URL("/-/ready"))
	return nil
}

// update writes v2 and waits for the app's first reload.
func (d *demo) update() error {
	t0 := time.Now()
	if err := update(d.vol, v2, true); err != nil {
		return err
	}
	cfg, err := d.waitReload(1)
	if err != nil {
		return err
	}
	say("   -> the app reloaded %s after the swap; it now runs with: %s", time.Since(t0).Round(time.Millisecond), cfg)
	return nil
}

// identicalRewrite swaps ..data to a new version directory with the bytes
// the volume already holds. hotreload sees the events of an update, hashes
// what the app would read, finds what it last delivered, and reloads
// nothing; biggerUpdate checks that by the app's count of reloads.
func (d *demo) identicalRewrite() error {
	events := d.metric("hotreload_watch_events_total")
	before, err := os.Readlink(filepath.Join(d.vol.Dir, "..data"))
	if err != nil {
		return err
	}
	after, err := swapIdentical(d.vol.Dir)
	if err != nil {
		return err
	}
	say("   ..data -> %s, was %s", after, before)
	if !poll.Until(deadline, func() bool { return d.metric("hotreload_watch_events_total") > events }) {
		return errors.New("hotreload saw no event from the swap")
	}
	say("   -> hotreload got %.0f filesystem events for the swap; the content it hashes is what the app\n"+
		"      already has, so no reload (step 7 checks that: the app's next reload is its 2nd).",
		d.metric("hotreload_watch_events_total")-events)
	return nil
}

// chmodNoise flips the modes of the volume's files, as the kubelet does for
// fsGroup.
func (d *demo) chmodNoise() error {
	events := d.metric("hotreload_watch_events_total")
	for range 3 {
		if err := d.vol.Chmod(); err != nil {
			return err
		}
	}
	if !poll.Until(deadline, func() bool { return d.metric("hotreload_watch_events_total") > events }) {
		return errors.New("hotreload saw no event from the chmods")
	}
	say("   -> hotreload got %.0f filesystem events; it hashes content, not events, so no reload\n"+
		"      (the next step checks that too).", d.metric("hotreload_watch_events_total")-events)
	return nil
}

// biggerUpdate writes v3 and checks that it is the app's second reload
// only: the identical re-write and the noise reloaded nothing.
func (d *demo) biggerUpdate() error {
	if err := update(d.vol, v3, true); err != nil {
		return err
	}
	cfg, err := d.waitReload(2)
	if err != nil {
		return err
	}
	if n := d.app.reloads(); n != 2 {
		return fmt.Errorf("the app was reloaded %d times, want 2: the re-write or the noise reloaded it", n)
	}
	say("   -> reload #2 (so steps 5 and 6 reloaded nothing); the app now runs with: %s", cfg)
	showLayout(d.vol.Dir)
	return nil
}

// waitReload waits until the app has been reloaded n times, and hotreload
// has logged it, and returns the app's config.
func (d *demo) waitReload(n int) (string, error) {
	if !poll.Until(deadline, func() bool { return d.app.reloads() >= n }) {
		return "", fmt.Errorf("the app was not reloaded within %s (reloads: %d, want %d)", deadline, d.app.reloads(), n)
	}
	// So that hotreload's log lines come before the demo's summary.
	if !poll.Until(deadline, func() bool { return d.hr.CountLog(" msg=reloaded ") >= n }) {
		return "", fmt.Errorf("hotreload did not log reload #%d within %s", n, deadline)
	}
	return d.app.current(), nil
}

// metric returns the value of an unlabelled metric, or -1.
func (d *demo) metric(name string) float64 {
	mfs, err := binary.Scrape(d.hr.URL("/metrics"))
	if err != nil {
		return -1
	}
	if v, ok := binary.Value(mfs, name, nil); ok {
		return v
	}
	return -1
}

func (d *demo) showMetrics() error {
	code, body, err := d.hr.Get("/metrics")
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

func (d *demo) stop() error {
	if _, err := d.hr.Stop(); err != nil {
		return err
	}
	say("   -> hotreload exited with code 0.")
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

// swapIdentical copies the current version directory of the volume at dir
// into a new ..<timestamp> directory and swaps ..data to it as the kubelet
// swaps an update (symlink ..data_tmp, rename over ..data), then removes the
// old version. It returns the new version's name. The visible links are
// untouched: the keys are the same.
func swapIdentical(dir string) (string, error) {
	oldName, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		return "", err
	}
	newDir, err := os.MkdirTemp(dir, time.Now().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return "", err
	}
	if err := os.Chmod(newDir, 0o755); err != nil {
		return "", err
	}
	if err := os.CopyFS(newDir, os.DirFS(filepath.Join(dir, oldName))); err != nil {
		return "", fmt.Errorf("copy %s: %w", oldName, err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(newDir), tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return "", err
	}
	return filepath.Base(newDir), os.RemoveAll(filepath.Join(dir, oldName))
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

// prefixLines is an io.Writer that says every complete line written to it
// with a prefix, to show hotreload's logs as they come.
type prefixLines struct {
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *prefixLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		say("%s%s", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
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
