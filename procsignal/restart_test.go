//go:build linux

package procsignal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/poll"
)

// Environment of the restart helpers (see runRestartHelper).
const (
	// envRestartHelper makes the test binary a supervisor, standing in for
	// the kubelet, or the app it restarts.
	envRestartHelper = "HOTRELOAD_SIGNAL_TEST_RESTART"
	// envRestartDir is the directory they share with the test: the app's
	// config, ready.<pid> files, exits.log and a stop file.
	envRestartDir = "HOTRELOAD_SIGNAL_TEST_RESTART_DIR"
	// envRestartName is the app's argv[0].
	envRestartName = "HOTRELOAD_SIGNAL_TEST_RESTART_NAME"
)

// runRestartHelper is the main function of a restart helper.
//
// As "kubelet" it starts the app, waits for it to exit, appends "exit
// <pid> <how>" to exits.log, and starts it again, until the file stop
// exists: a container's main process, restarted in place.
//
// As "app" it reads the file config when it starts: "ok" ends on SIGTERM
// with status 0, "stubborn" ignores SIGTERM, "bad" exits with status 1 at
// once (a config it refuses), "late" runs for 300ms and then exits with
// status 1 (a config it fails on after a while). It writes ready.<pid> when it runs, and its
// pid to app.pid.
func runRestartHelper(mode string) int {
	dir, name := os.Getenv(envRestartDir), os.Getenv(envRestartName)
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "restart helper %s: %v\n", mode, err)
		return 3
	}
	switch mode {
	case "kubelet":
		exe, err := os.Executable()
		if err != nil {
			return fail(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "stop")); err == nil {
				return 0
			}
			app := &exec.Cmd{Path: exe, Args: []string{name}, Env: append(os.Environ(), envRestartHelper+"=app"), Stderr: os.Stderr}
			if err := app.Start(); err != nil {
				return fail(err)
			}
			_ = app.Wait()
			how := "code " + strconv.Itoa(app.ProcessState.ExitCode())
			if ws, ok := app.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				how = "signal " + ws.Signal().String()
			}
			if err := appendLine(filepath.Join(dir, "exits.log"), fmt.Sprintf("exit %d %s", app.Process.Pid, how)); err != nil {
				return fail(err)
			}
		}
	case "app":
		config, err := os.ReadFile(filepath.Join(dir, "config"))
		if err != nil {
			return fail(err)
		}
		term := make(chan os.Signal, 1)
		switch strings.TrimSpace(string(config)) {
		case "ok":
			signal.Notify(term, syscall.SIGTERM)
		case "stubborn":
			signal.Ignore(syscall.SIGTERM)
		case "bad":
			return 1
		case "late":
			go func() { time.Sleep(300 * time.Millisecond); term <- syscall.SIGUSR1 }()
		default:
			return fail(fmt.Errorf("config %q", config))
		}
		pid := strconv.Itoa(os.Getpid())
		if err := os.WriteFile(filepath.Join(dir, "app.pid"), []byte(pid+"\n"), 0o644); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ready."+pid), nil, 0o644); err != nil {
			return fail(err)
		}
		if <-term == syscall.SIGUSR1 {
			return 1
		}
		return 0
	}
	return fail(errors.New("unknown mode"))
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// restartEnv is a supervised app: its directory and name.
type restartEnv struct {
	dir, name string
	kubelet   *exec.Cmd
}

// startSupervised starts a supervisor ("kubelet") of an app named name
// whose config is config, and waits until the app runs. With supervise
// false the app runs alone: nothing starts it again.
func startSupervised(t *testing.T, h *harness, name, config string, supervise bool) *restartEnv {
	t.Helper()
	e := &restartEnv{dir: t.TempDir(), name: name}
	e.setConfig(t, config)
	mode := "kubelet"
	if !supervise {
		mode = "app"
	}
	args := []string{"hrtest-kubelet"}
	if !supervise {
		args = []string{name}
	}
	cmd := &exec.Cmd{Path: h.exe, Args: args, Env: append(os.Environ(),
		envRestartHelper+"="+mode, envRestartDir+"="+e.dir, envRestartName+"="+name)}
	h.start(t, cmd)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(e.dir, "stop"), nil, 0o644) })
	e.kubelet = cmd
	e.waitReady(t, 1)
	return e
}

func (e *restartEnv) setConfig(t *testing.T, config string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, "config"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ready returns the pids that wrote ready files, in the order they started.
func (e *restartEnv) ready() []int {
	m, _ := filepath.Glob(filepath.Join(e.dir, "ready.*"))
	var pids []int
	for _, f := range m {
		pid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Ext(f), "."))
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

func (e *restartEnv) waitReady(t *testing.T, n int) []int {
	t.Helper()
	var pids []int
	poll.Eventually(t, 20*time.Second, func() bool { pids = e.ready(); return len(pids) >= n }, "waiting for %d runs of %s", n, e.name)
	return pids
}

func (e *restartEnv) exits() []string {
	b, _ := os.ReadFile(filepath.Join(e.dir, "exits.log"))
	return strings.Fields(strings.ReplaceAll(string(b), "\n", ";"))
}

func restarter(t *testing.T, opts RestartOptions) *Restarter {
	t.Helper()
	r, err := NewRestarter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRestart runs the restarts in a fresh PID namespace, with a
// supervisor that plays the kubelet: it starts the app's container again
// whenever its main process exits.
func TestRestart(t *testing.T) {
	if !e2etest.InPIDNamespace(t) {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{exe: exe}

	t.Run("SIGTERM, and the kubelet starts it again", func(t *testing.T) {
		e := startSupervised(t, h, h.unique("app"), "ok", true)
		first := e.ready()[0]
		r := restarter(t, RestartOptions{ProcessName: e.name, Settle: 200 * time.Millisecond})
		if got := r.Name(); got != "restart:"+e.name {
			t.Errorf("Name = %q", got)
		}
		for i := 2; i <= 3; i++ {
			if err := r.Notify(t.Context()); err != nil {
				t.Fatalf("restart %d: %v", i-1, err)
			}
			if pids := e.waitReady(t, i); len(pids) != i {
				t.Fatalf("after restart %d, runs %v, want %d", i-1, pids, i)
			}
		}
		if got := e.exits(); len(got) < 1 || !strings.HasPrefix(strings.Join(got, " "), fmt.Sprintf("exit %d code 0", first)) {
			t.Errorf("exits %v, want pid %d ended by its SIGTERM handler", got, first)
		}
	})

	t.Run("drained first", func(t *testing.T) {
		// Draining from before the app is stopped until it runs again:
		// the sidecar's /-/ready takes the pod out of its Services first.
		e := startSupervised(t, h, h.unique("drain"), "ok", true)
		const drain = 500 * time.Millisecond
		r := restarter(t, RestartOptions{ProcessName: e.name, Drain: drain, Settle: 100 * time.Millisecond})
		if r.Draining() {
			t.Fatal("Draining before any restart")
		}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- r.Notify(t.Context()) }()
		poll.Eventually(t, 5*time.Second, r.Draining, "Draining during the restart")
		if got := e.ready(); len(got) != 1 || len(e.exits()) != 0 {
			t.Errorf("while draining: runs %v, exits %v: want the app untouched", got, e.exits())
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < drain {
			t.Errorf("restart took %v, less than the drain %v", d, drain)
		}
		if r.Draining() || len(e.waitReady(t, 2)) != 2 {
			t.Errorf("after the restart: Draining %v, runs %v", r.Draining(), e.ready())
		}
	})

	t.Run("no drain without an app", func(t *testing.T) {
		name := h.unique("nodrain")
		r := restarter(t, RestartOptions{ProcessName: name, Drain: time.Hour})
		if err := r.Notify(t.Context()); err == nil || !strings.Contains(err.Error(), "no process named "+name) {
			t.Errorf("Notify = %v, want no process named %s at once", err, name)
		}
	})

	t.Run("SIGKILL after the grace period", func(t *testing.T) {
		e := startSupervised(t, h, h.unique("stubborn"), "stubborn", true)
		first := e.ready()[0]
		e.setConfig(t, "ok") // for the next run
		const grace = 300 * time.Millisecond
		r := restarter(t, RestartOptions{ProcessName: e.name, Grace: grace, Settle: 100 * time.Millisecond})
		start := time.Now()
		if err := r.Notify(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < grace {
			t.Errorf("restart took %v, less than the grace period %v", d, grace)
		}
		if got, want := strings.Join(e.exits(), " "), fmt.Sprintf("exit %d signal killed", first); !strings.HasPrefix(got, want) {
			t.Errorf("exits %q, want %q", got, want)
		}
	})

	t.Run("refused: the restarted app exits", func(t *testing.T) {
		e := startSupervised(t, h, h.unique("bad"), "ok", true)
		e.setConfig(t, "bad")
		r := restarter(t, RestartOptions{ProcessName: e.name, Timeout: 10 * time.Second, Settle: 5 * time.Second})
		err := r.Notify(t.Context())
		if !errors.Is(err, notifier.ErrRefused) {
			t.Fatalf("Notify = %v, want a refusal", err)
		}
		// The app dies within milliseconds, and the kubelet starts it over
		// and over: seen dying, or never seen running.
		reason, _ := notifier.RefusedReason(err)
		if reason != "the restarted app exited within 5s" && reason != "the app did not run again within 10s of its restart" {
			t.Errorf("reason %q", reason)
		}
		e.setConfig(t, "ok")
	})

	t.Run("refused: the restarted app exits after a while", func(t *testing.T) {
		// Every run with the new configuration dies 300ms after it started,
		// well within the settle time: whichever run the restarter finds,
		// it sees it die. (Killing one run from here raced with the
		// restarter's search: it could find the run after, which lived.)
		e := startSupervised(t, h, h.unique("late"), "ok", true)
		e.setConfig(t, "late")
		r := restarter(t, RestartOptions{ProcessName: e.name, Settle: 10 * time.Second})
		err := r.Notify(t.Context())
		e.setConfig(t, "ok")
		reason, _ := notifier.RefusedReason(err)
		if !errors.Is(err, notifier.ErrRefused) || reason != "the restarted app exited within 10s" {
			t.Fatalf("Notify = %v, want a refusal: the restarted app exited within 10s", err)
		}
		var pid int
		if _, serr := fmt.Sscanf(err.Error(), "the restarted app, pid %d ", &pid); serr != nil || !slices.Contains(e.ready()[1:], pid) {
			t.Errorf("Notify = %v: want it to name one of the restarted runs %v", err, e.ready()[1:])
		}
	})

	t.Run("refused: nothing starts it again", func(t *testing.T) {
		e := startSupervised(t, h, h.unique("alone"), "ok", false)
		pid := e.ready()[0]
		r := restarter(t, RestartOptions{ProcessName: e.name, Timeout: 300 * time.Millisecond})
		err := r.Notify(t.Context())
		want := fmt.Sprintf("pid %d (%s) exited, but no new process matched within 300ms: the kubelet did not start the app again, "+
			"or it exits at once with the new configuration (pid %d (%s)'s parent, pid 1, is in this PID namespace: ",
			pid, h.read(t, os.Getpid()).Comm, pid, h.read(t, os.Getpid()).Comm)
		if !errors.Is(err, notifier.ErrRefused) || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("Notify = %v, want a refusal starting %q", err, want)
		}
	})

	t.Run("by pid file", func(t *testing.T) {
		e := startSupervised(t, h, h.unique("pidfile"), "ok", true)
		r := restarter(t, RestartOptions{PIDFile: filepath.Join(e.dir, "app.pid"), Settle: 100 * time.Millisecond})
		if err := r.Notify(t.Context()); err != nil {
			t.Fatal(err)
		}
		pids := e.waitReady(t, 2)
		b, _ := os.ReadFile(filepath.Join(e.dir, "app.pid"))
		if len(pids) != 2 || strings.TrimSpace(string(b)) != strconv.Itoa(pids[1]) {
			t.Errorf("runs %v, pid file %q: want a second run that wrote its pid", pids, b)
		}
	})

	t.Run("no process", func(t *testing.T) {
		name := h.unique("none")
		err := restarter(t, RestartOptions{ProcessName: name}).Notify(t.Context())
		want := "no process named " + name
		if err == nil || err.Error() != want || !errors.Is(err, ErrNoProcess) || errors.Is(err, notifier.ErrRefused) {
			t.Fatalf("Notify = %v, want %q, an ErrNoProcess (whose hint says shareProcessNamespace: true), not a refusal", err, want)
		}
	})

	t.Run("two processes", func(t *testing.T) {
		name := h.unique("twice")
		h.startSleep(t, name)
		h.startSleep(t, name)
		err := restarter(t, RestartOptions{ProcessName: name}).Notify(t.Context())
		want := "2 processes named " + name + ": a restart needs the app's main process alone; name it by its command line or a pid file"
		if err == nil || err.Error() != want {
			t.Fatalf("Notify = %v, want %q", err, want)
		}
	})

	t.Run("permission denied", func(t *testing.T) {
		if os.Geteuid() != 0 || !allUIDs() {
			e2etest.SkipOrFail(t, "needs root, with every uid, to start a target under another uid")
		}
		const targetUID, notifierUID = 65534, 65533
		name := h.unique("eperm")
		path, err := exec.LookPath("sleep")
		if err != nil {
			e2etest.SkipOrFail(t, "no sleep(1): %v", err)
		}
		cmd := &exec.Cmd{Path: path, Args: []string{name, "3600"},
			SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: targetUID, Gid: targetUID}}}
		h.start(t, cmd)
		poll.Eventually(t, 10*time.Second, func() bool {
			p, err := ReadProcess("", cmd.Process.Pid)
			return err == nil && len(p.Args) > 0 && p.Args[0] == name
		}, "waiting for sleep to start")
		r := restarter(t, RestartOptions{ProcessName: name, Timeout: time.Second})
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // no Unlock: the thread dies with its changed credentials
			if err := setEUID(notifierUID)(); err != nil {
				errc <- err
				return
			}
			errc <- r.Notify(context.Background())
		}()
		err = <-errc
		want := fmt.Sprintf("send SIGTERM to pid %d (sleep, uid %d): operation not permitted: run hotreload as the target's uid (securityContext.runAsUser: %d)",
			cmd.Process.Pid, targetUID, targetUID)
		if !errors.Is(err, syscall.EPERM) || !strings.HasPrefix(err.Error(), want) || errors.Is(err, notifier.ErrRefused) {
			t.Fatalf("Notify = %v, want EPERM starting %q, not a refusal", err, want)
		}
	})
}

func TestNewRestarter(t *testing.T) {
	for _, tt := range []struct {
		opts RestartOptions
		want string
	}{
		{RestartOptions{}, "a restart needs the app's main process: a process name, command line or pid file"},
		{RestartOptions{ProcessName: "a", Grace: -1}, "restart grace period -1ns: must not be negative"},
		{RestartOptions{ProcessCmdline: "("}, "process command line: error parsing regexp"},
	} {
		if _, err := NewRestarter(tt.opts); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("NewRestarter(%+v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
}
