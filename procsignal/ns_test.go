//go:build linux

package procsignal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/poll"
)

// TestNamespace runs the tests that signal real processes in a fresh PID
// namespace with its own /proc (e2etest.InPIDNamespace): there, the test
// binary is pid 1 and sees only the processes it started, so nothing
// outside the test can ever be signalled.
func TestNamespace(t *testing.T) {
	if !e2etest.InPIDNamespace(t) {
		return
	}
	if procs, err := ListProcesses(""); err != nil || len(procs) != 1 {
		t.Fatalf("want only this process in /proc, got %v, %v", procs, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{exe: exe}

	t.Run("shell trap by cmdline", func(t *testing.T) {
		marker := h.unique("trap")
		sh, hupFile := h.startTrap(t, marker, "HUP", nil)
		before := h.read(t, sh.Process.Pid)
		n := h.notifier(t, Options{ProcessCmdline: ": " + marker + ";"})
		if err := n.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		poll.Eventually(t, 10*time.Second, func() bool {
			b, _ := os.ReadFile(hupFile)
			return string(b) == "hup\n"
		}, "waiting for the trap to write %s", hupFile)
		if after := h.read(t, sh.Process.Pid); after.StartTime != before.StartTime || after.Dead() {
			t.Errorf("target is not the same live process: before %+v, after %+v", before, after)
		}
	})

	t.Run("go catcher by name", func(t *testing.T) {
		name := h.unique("catch")
		dir, c := h.startHelper(t, name, helperCatch, 1)
		n := h.notifier(t, Options{ProcessName: name})
		for i := 1; i <= 2; i++ {
			if err := n.Notify(t.Context()); err != nil {
				t.Fatalf("Notify %d: %v", i, err)
			}
			h.waitHups(t, dir, slices.Repeat([]int{c.Process.Pid}, i))
		}
	})

	t.Run("not handled is not sent", func(t *testing.T) {
		name := h.unique("noop")
		sleep := h.startSleep(t, name)
		pid := sleep.Process.Pid
		before := h.read(t, pid)
		caught, ignored, err := Handles("", pid, syscall.SIGHUP)
		if err != nil || caught || ignored {
			t.Fatalf("sleep handles SIGHUP: %v, %v, %v", caught, ignored, err)
		}
		n := h.notifier(t, Options{ProcessName: name})
		err = n.Notify(t.Context())
		want := fmt.Sprintf("pid %d (sleep) does not handle SIGHUP and would be terminated by it: not sent", pid)
		if err == nil || err.Error() != want {
			t.Fatalf("Notify = %v, want %q", err, want)
		}
		// Had it been sent, sleep would be dying now; watch it for a
		// while to see that it does not.
		var now Process
		if poll.Each(10*time.Millisecond, 300*time.Millisecond, func() bool {
			now = h.read(t, pid)
			return now.Dead() || now.StartTime != before.StartTime
		}) {
			t.Fatalf("target died although nothing was sent: %+v", now)
		}

		t.Run("forced", func(t *testing.T) {
			n := h.notifier(t, Options{ProcessName: name, Force: true, CheckDelay: 5 * time.Second})
			start := time.Now()
			err := n.Notify(t.Context())
			want := fmt.Sprintf("pid %d (sleep) exited after SIGHUP", pid)
			if err == nil || err.Error() != want {
				t.Fatalf("Notify = %v, want %q", err, want)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("death noticed after %v, want well before the check delay", d)
			}
			err = sleep.Wait()
			ws, _ := sleep.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGHUP {
				t.Errorf("sleep ended with %v, want killed by SIGHUP", err)
			}
		})
	})

	t.Run("ignored is not sent", func(t *testing.T) {
		marker := h.unique("ignore")
		sh, _ := h.startTrap(t, marker, "", nil)
		n := h.notifier(t, Options{ProcessCmdline: marker + ";"})
		err := n.Notify(t.Context())
		want := fmt.Sprintf("pid %d (sh) ignores SIGHUP, so it would have no effect: not sent", sh.Process.Pid)
		if err == nil || err.Error() != want {
			t.Fatalf("Notify = %v, want %q", err, want)
		}
	})

	t.Run("only masters of trees", func(t *testing.T) {
		name := h.unique("tree")
		dir1, m1 := h.startHelper(t, name, helperTree, 3)
		dir2, m2 := h.startHelper(t, name, helperTree, 3)
		procs, err := ListProcesses("")
		if err != nil {
			t.Fatal(err)
		}
		var workers []int
		for _, p := range procs {
			if (p.PPID == m1.Process.Pid || p.PPID == m2.Process.Pid) && MatchName(p, name) {
				workers = append(workers, p.PID)
			}
		}
		if len(workers) != 4 {
			t.Fatalf("want 4 workers named %s, got %v", name, workers)
		}
		n := h.notifier(t, Options{ProcessName: name})
		if err := n.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		// The masters log their hups; a worker that got one would log it
		// to the same file, before Notify returned after its check delay.
		h.waitHups(t, dir1, []int{m1.Process.Pid})
		h.waitHups(t, dir2, []int{m2.Process.Pid})
	})

	t.Run("confirm workers replaced", func(t *testing.T) {
		name := h.unique("respawn")
		dir, m := h.startHelper(t, name, helperRespawn, 3)
		before := h.children(t, m.Process.Pid)
		n := h.notifier(t, Options{ProcessName: name, ConfirmTimeout: 20 * time.Second})
		if err := n.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		h.waitHups(t, dir, []int{m.Process.Pid})
		// Notify returned once one old worker was gone and a new one
		// was there.
		after := h.children(t, m.Process.Pid)
		if !slices.ContainsFunc(after, func(pid int) bool { return !slices.Contains(before, pid) }) {
			t.Errorf("workers %v before, %v after: no new one", before, after)
		}
	})

	t.Run("confirm workers kept", func(t *testing.T) {
		name := h.unique("keep")
		dir, m := h.startHelper(t, name, helperTree, 3)
		const timeout = 500 * time.Millisecond
		n := h.notifier(t, Options{ProcessName: name, ConfirmTimeout: timeout})
		start := time.Now()
		err := n.Notify(t.Context())
		want := fmt.Sprintf("signal delivered but %s kept its workers: the new config was probably refused; see the app's log", h.read(t, m.Process.Pid))
		if err == nil || err.Error() != want || !errors.Is(err, notifier.ErrUnconfirmed) {
			t.Fatalf("Notify = %v, want %q, a notifier.ErrUnconfirmed", err, want)
		}
		if d := time.Since(start); d < timeout {
			t.Errorf("gave up after %v, before the confirm timeout %v", d, timeout)
		}
		h.waitHups(t, dir, []int{m.Process.Pid})
	})

	t.Run("confirm without children", func(t *testing.T) {
		name := h.unique("alone")
		dir, c := h.startHelper(t, name, helperCatch, 1)
		n := h.notifier(t, Options{ProcessName: name, ConfirmTimeout: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := n.Notify(ctx); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		h.waitHups(t, dir, []int{c.Process.Pid})
	})

	t.Run("nginx", func(t *testing.T) { testNginx(t, h) })

	t.Run("no match", func(t *testing.T) {
		name := h.unique("none")
		n := h.notifier(t, Options{ProcessName: name})
		err := n.Notify(t.Context())
		if want := "no process named " + name; err == nil || err.Error() != want || !errors.Is(err, ErrNoProcess) {
			t.Fatalf("Notify = %v, want %q", err, want)
		}
	})

	t.Run("pid file", func(t *testing.T) {
		name := h.unique("pidfile")
		pidFile := filepath.Join(t.TempDir(), "app.pid")
		n := h.notifier(t, Options{PIDFile: pidFile, ProcessName: name})
		if err := n.Notify(t.Context()); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Notify without pid file = %v, want ErrNotExist", err)
		}
		dir1, a := h.startHelper(t, name, helperCatch, 1)
		writePIDFile(t, pidFile, a.Process.Pid)
		if err := n.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		h.waitHups(t, dir1, []int{a.Process.Pid})

		// The app restarts and rotates its pid file; the old one lives
		// on and must not be signalled again.
		dir2, b := h.startHelper(t, name, helperCatch, 1)
		writePIDFile(t, pidFile, b.Process.Pid)
		if err := n.Notify(t.Context()); err != nil {
			t.Fatalf("Notify after rotation: %v", err)
		}
		h.waitHups(t, dir2, []int{b.Process.Pid})
		h.waitHups(t, dir1, []int{a.Process.Pid})

		// The app is gone and left its pid file behind.
		h.stop(b)
		err := n.Notify(t.Context())
		if !errors.Is(err, syscall.ESRCH) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d from pid file", b.Process.Pid)) {
			t.Fatalf("Notify with stale pid file = %v, want ESRCH naming pid %d", err, b.Process.Pid)
		}
	})

	t.Run("vanished between lookup and kill", func(t *testing.T) {
		name := h.unique("vanish")
		_, a := h.startHelper(t, name, helperCatch, 1)
		var b *exec.Cmd
		var dirB string
		var seen []int
		n := h.notifier(t, Options{ProcessName: name})
		n.beforeSend = func(p Process) {
			seen = append(seen, p.PID)
			if p.PID != a.Process.Pid {
				return
			}
			// The app restarts right after the lookup: a replacement comes
			// up and the process that was found exits and is reaped.
			dirB, b = h.startHelper(t, name, helperCatch, 1)
			h.stop(a)
		}
		if err := n.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		if b == nil || !slices.Equal(seen, []int{a.Process.Pid, b.Process.Pid}) {
			t.Fatalf("sent to %v, want the vanished pid %d, then its replacement", seen, a.Process.Pid)
		}
		h.waitHups(t, dirB, []int{b.Process.Pid})
	})

	t.Run("permission denied", func(t *testing.T) {
		if os.Geteuid() != 0 || !allUIDs() {
			e2etest.SkipOrFail(t, "needs root, with every uid, to start a target under another uid")
		}
		const targetUID, notifierUID = 65534, 65533
		marker := h.unique("eperm")
		sh, hupFile := h.startTrap(t, marker, "HUP", &syscall.Credential{Uid: targetUID, Gid: targetUID})
		// Let the target's trap write its file.
		for dir, mode := range map[string]os.FileMode{filepath.Dir(hupFile): 0o777, filepath.Dir(filepath.Dir(hupFile)): 0o711} {
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
		}
		n := h.notifier(t, Options{ProcessCmdline: marker + ";"})
		// As another uid, KILL is left in the bounding set only, as in a
		// container that is not root and adds KILL.
		err := notifyAs(t.Context(), n, setEUID(notifierUID))
		want := fmt.Sprintf("send SIGHUP to pid %d (sh, uid %d): operation not permitted: "+
			"run hotreload as the target's uid (securityContext.runAsUser: %d), "+
			"or as root with every capability dropped but KILL (runAsUser: 0, capabilities drop [ALL] add [KILL]); "+
			"hotreload has KILL in its bounding set only, not in effect (CapEff), "+
			"as a container that is not root gets it from capabilities add [KILL]", sh.Process.Pid, targetUID, targetUID)
		if err == nil || err.Error() != want {
			t.Fatalf("Notify as uid %d = %v, want %q", notifierUID, err, want)
		}
		if !errors.Is(err, syscall.EPERM) {
			t.Errorf("Notify = %v, want errors.Is EPERM", err)
		}

		// What the hint says works does.
		if err := notifyAs(t.Context(), n, setEUID(targetUID)); err != nil {
			t.Errorf("Notify as the target's uid %d: %v", targetUID, err)
		}
		if err := notifyAs(t.Context(), n, setCaps(1<<unix.CAP_KILL)); err != nil {
			t.Errorf("Notify as root with KILL alone: %v", err)
		}
		err = notifyAs(t.Context(), n, setCaps(0))
		if err == nil || !errors.Is(err, syscall.EPERM) {
			t.Errorf("Notify as root without KILL = %v, want EPERM", err)
		}
		poll.Eventually(t, 10*time.Second, func() bool {
			b, _ := os.ReadFile(hupFile)
			return string(b) == "hup\nhup\n"
		}, "waiting for the two signals that were sent to reach the trap")
	})
}

// allUIDs reports whether this process sees every uid, which it does
// outside a user namespace and not in one that maps its own uid only.
func allUIDs() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	return err == nil && strings.Join(strings.Fields(string(b)), " ") == "0 0 4294967295"
}

// notifyAs runs n.Notify on an OS thread whose credentials setup changed,
// and returns its error. The thread is never handed back to the Go
// scheduler: it exits with its goroutine.
func notifyAs(ctx context.Context, n *Notifier, setup func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // no Unlock: the thread dies with its changed credentials
		if err := setup(); err != nil {
			errc <- err
			return
		}
		errc <- n.Notify(ctx)
	}()
	return <-errc
}

// setEUID sets the calling thread's effective uid, which drops its
// effective capabilities when uid is not 0. The raw system call changes
// this thread only; syscall.Setresuid would change every thread.
func setEUID(uid int) func() error {
	return func() error {
		keep := ^uintptr(0) // -1: leave unchanged
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
			return fmt.Errorf("setresuid: %w", e)
		}
		return nil
	}
}

// setCaps leaves the calling thread, still root, with the capabilities of
// mask only (permitted and effective), as a container running as root with
// every capability dropped but those.
func setCaps(mask uint32) func() error {
	return func() error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		data := [2]unix.CapUserData{{Effective: mask, Permitted: mask}}
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("capset: %w", err)
		}
		return nil
	}
}

func writePIDFile(t *testing.T, path string, pid int) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// harness starts target processes inside the namespace.
type harness struct {
	exe string
	n   int
}

// unique returns a name no other process has, e.g. "hrtest-trap-3".
func (h *harness) unique(what string) string {
	h.n++
	return fmt.Sprintf("hrtest-%s-%d", what, h.n)
}

func (h *harness) notifier(t *testing.T, opts Options) *Notifier {
	t.Helper()
	if opts.Signal == 0 {
		opts.Signal = syscall.SIGHUP
	}
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// children returns the pids of the live children of pid.
func (h *harness) children(t *testing.T, pid int) []int {
	t.Helper()
	procs, err := ListProcesses("")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, p := range procs {
		if p.PPID == pid && !p.Dead() {
			kids = append(kids, p.PID)
		}
	}
	return kids
}

func (h *harness) read(t *testing.T, pid int) Process {
	t.Helper()
	p, err := ReadProcess("", pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start starts cmd in its own process group, which is killed when the test
// ends.
func (h *harness) start(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Stderr = os.Stderr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.stop(cmd) })
}

// stop kills cmd's process group and reaps cmd; it may be called again.
func (h *harness) stop(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

// startTrap starts a shell whose command line contains ": <marker>;" and
// which appends "hup" to the returned file on SIGHUP, or ignores SIGHUP if
// sig is "". It returns once the shell has set up its trap.
func (h *harness) startTrap(t *testing.T, marker, sig string, cred *syscall.Credential) (*exec.Cmd, string) {
	t.Helper()
	hupFile := filepath.Join(t.TempDir(), "hup")
	action := `echo hup >> "$HUP_FILE"`
	if sig == "" {
		action = ""
	}
	script := fmt.Sprintf(`trap '%s' HUP; : %s; while :; do sleep 0.05; done`, action, marker)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "HUP_FILE="+hupFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	h.start(t, cmd)
	poll.Eventually(t, 10*time.Second, func() bool {
		caught, ignored, err := Handles("", cmd.Process.Pid, syscall.SIGHUP)
		return err == nil && (caught && sig != "" || ignored && sig == "")
	}, "waiting for the shell's trap")
	return cmd, hupFile
}

// startSleep starts sleep(1) with argv[0] name; sleep does not handle
// SIGHUP.
func (h *harness) startSleep(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	path, err := exec.LookPath("sleep")
	if err != nil {
		e2etest.SkipOrFail(t, "no sleep(1): %v", err)
	}
	cmd := &exec.Cmd{Path: path, Args: []string{name, "3600"}}
	h.start(t, cmd)
	poll.Eventually(t, 10*time.Second, func() bool {
		p, err := ReadProcess("", cmd.Process.Pid)
		return err == nil && p.Comm == "sleep" && len(p.Args) > 0 && p.Args[0] == name
	}, "waiting for sleep to start")
	return cmd
}

// startHelper starts the test binary as a target process with argv[0]
// name, in the given mode, and waits until ready processes (itself and its
// workers) have set up their SIGHUP handlers. It returns the directory with
// their hup.log.
func (h *harness) startHelper(t *testing.T, name, mode string, ready int) (string, *exec.Cmd) {
	t.Helper()
	dir := t.TempDir()
	cmd := &exec.Cmd{
		Path: h.exe,
		Args: []string{name, mode},
		Env:  append(os.Environ(), envHelper+"="+mode, envDir+"="+dir),
	}
	h.start(t, cmd)
	poll.Eventually(t, 20*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
		return len(m) == ready
	}, "waiting for %d %s processes to be ready", ready, name)
	return dir, cmd
}

// waitHups waits until dir/hup.log lists exactly the hups of want (pids,
// in any order), and fails if it lists more.
func (h *harness) waitHups(t *testing.T, dir string, want []int) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []int
	poll.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "hup.log"))
		got = got[:0]
		for line := range strings.Lines(string(b)) {
			pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "hup ")))
			got = append(got, pid)
		}
		slices.Sort(got)
		if len(got) > len(want) {
			t.Fatalf("hups from %v, want %v", got, want)
		}
		return slices.Equal(got, want)
	}, "waiting for hups %v in %s", want, dir)
}
