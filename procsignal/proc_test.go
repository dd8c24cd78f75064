//go:build linux

package procsignal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/poll"
)

// fakeBase is above the kernel's largest possible pid (PID_MAX_LIMIT,
// 4194304): a pid in a fake proc tree never names a real process, so even a
// bug cannot signal anything with it.
const fakeBase = 1<<22 + 1000

// fakeProc is one process in a fake proc tree.
type fakeProc struct {
	pid, ppid int
	comm      string
	state     byte // 0 means 'S'
	start     uint64
	uid       int
	args      []string
	exe       string // "" means no exe link, as for another user's process
	sigCgt    string // "" means all zeros
	sigIgn    string
}

// writeFakeProc writes p into root the way the kernel shows it.
func writeFakeProc(t testing.TB, root string, p fakeProc) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(p.pid))
	state := p.state
	if state == 0 {
		state = 'S'
	}
	zero := "0000000000000000"
	mask := func(s string) string {
		if s == "" {
			return zero
		}
		return s
	}
	status := fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\t%c (sleeping)\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\n"+
		"Uid:\t%d\t%d\t%d\t%d\nGid:\t0\t0\t0\t0\nSigQ:\t0/31366\nSigPnd:\t%s\nShdPnd:\t%s\n"+
		"SigBlk:\t%s\nSigIgn:\t%s\nSigCgt:\t%s\nCapInh:\t0000000000000000\n",
		p.comm, state, p.pid, p.pid, p.ppid, p.uid, p.uid, p.uid, p.uid, zero, zero, zero, mask(p.sigIgn), mask(p.sigCgt))
	stat := fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 %d 0 %d 10000000 500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
		p.pid, p.comm, state, p.ppid, p.pid, p.pid, 1, p.start)
	files := map[string]string{
		"stat":    stat,
		"status":  status,
		"cmdline": strings.Join(p.args, "\x00"),
	}
	if len(p.args) > 0 {
		files["cmdline"] += "\x00"
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if p.exe != "" {
		if err := os.Symlink(p.exe, filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadProcessOddComm reads a comm with spaces and parentheses, which
// stat shows in parentheses: the fields after it are found from the last ')'.
func TestReadProcessOddComm(t *testing.T) {
	root := t.TempDir()
	for _, p := range []fakeProc{
		{pid: fakeBase + 1, ppid: 7, comm: "a) b (c)", state: 'Z', start: 987654},
		{pid: fakeBase + 2, ppid: 2, comm: "", state: 'R', start: 12, args: []string{"x"}},
	} {
		writeFakeProc(t, root, p)
	}
	tests := []struct {
		pid  int
		want Process
	}{
		{fakeBase + 1, Process{PID: fakeBase + 1, PPID: 7, Comm: "a) b (c)", State: 'Z', StartTime: 987654}},
		{fakeBase + 2, Process{PID: fakeBase + 2, PPID: 2, Comm: "", State: 'R', StartTime: 12, Args: []string{"x"}}},
	}
	for _, tt := range tests {
		got, err := ReadProcess(root, tt.pid)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ReadProcess(%d) = %+v, %v; want %+v", tt.pid, got, err, tt.want)
		}
	}
}

func TestListProcesses(t *testing.T) {
	root := t.TempDir()
	procs := []fakeProc{
		{pid: fakeBase + 1, comm: "pause", start: 10, args: []string{"/pause"}, exe: "/pause"},
		{pid: fakeBase + 9, ppid: fakeBase + 1, comm: "nginx", start: 20, uid: 101,
			args: []string{"nginx: master process /usr/sbin/nginx -g daemon off;"}, exe: "/usr/sbin/nginx (deleted)"},
		{pid: fakeBase + 10, ppid: fakeBase + 9, comm: "nginx", start: 21, uid: 101, args: []string{"nginx: worker process"}},
		{pid: fakeBase + 11, ppid: fakeBase + 1, comm: "kworker/0:1", state: 'I', start: 5},
	}
	for _, p := range procs {
		writeFakeProc(t, root, p)
	}
	// Not processes, or gone by the time they are read.
	for _, dir := range []string{"self", "sys", "0", strconv.Itoa(fakeBase + 12)} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "99"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := ListProcesses(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{
		{PID: fakeBase + 1, Comm: "pause", Exe: "/pause", Args: []string{"/pause"}, State: 'S', StartTime: 10},
		{PID: fakeBase + 9, PPID: fakeBase + 1, Comm: "nginx", Exe: "/usr/sbin/nginx", State: 'S', StartTime: 20, UID: 101,
			Args: []string{"nginx: master process /usr/sbin/nginx -g daemon off;"}},
		{PID: fakeBase + 10, PPID: fakeBase + 9, Comm: "nginx", State: 'S', StartTime: 21, UID: 101,
			Args: []string{"nginx: worker process"}},
		{PID: fakeBase + 11, PPID: fakeBase + 1, Comm: "kworker/0:1", State: 'I', StartTime: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListProcesses:\n got %+v\nwant %+v", got, want)
	}

	t.Run("missing root", func(t *testing.T) {
		if _, err := ListProcesses(filepath.Join(root, "nope")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("read one missing", func(t *testing.T) {
		if _, err := ReadProcess(root, fakeBase+12); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v, want fs.ErrNotExist", err)
		}
	})
}

func TestListProcessesReal(t *testing.T) {
	procs, err := ListProcesses("")
	if err != nil {
		t.Fatal(err)
	}
	var self *Process
	for i, p := range procs {
		if i > 0 && procs[i-1].PID >= p.PID {
			t.Fatalf("not ordered by pid: %d before %d", procs[i-1].PID, p.PID)
		}
		if p.PID == os.Getpid() {
			self = &procs[i]
		}
	}
	if self == nil {
		t.Fatalf("own pid %d not among %d processes", os.Getpid(), len(procs))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if self.PPID != os.Getppid() || self.Exe != exe || self.UID != os.Getuid() || self.StartTime == 0 ||
		!reflect.DeepEqual(self.Args, os.Args) || self.Comm != filepath.Base(exe)[:min(len(filepath.Base(exe)), commLen)] {
		t.Errorf("own process = %+v; want ppid %d, exe %s, uid %d, args %q", *self, os.Getppid(), exe, os.Getuid(), os.Args)
	}
}

func TestHandles(t *testing.T) {
	root := t.TempDir()
	// nginx catches HUP, USR1, USR2, WINCH, ... and ignores PIPE: the masks
	// of a real nginx master.
	writeFakeProc(t, root, fakeProc{pid: fakeBase + 1, comm: "nginx", args: []string{"nginx"},
		sigIgn: "0000000000001000", sigCgt: "0000000018016a07"})
	writeFakeProc(t, root, fakeProc{pid: fakeBase + 2, comm: "rt", args: []string{"rt"},
		sigCgt: "8000000200000000"}) // 34 and 64
	writeFakeProc(t, root, fakeProc{pid: fakeBase + 3, comm: "garbage", args: []string{"garbage"}, sigCgt: "xyz"})

	tests := []struct {
		name             string
		pid              int
		sig              syscall.Signal
		caught, ignored  bool
		wantErr          string
		wantErrNotExists bool
	}{
		{name: "nginx HUP", pid: fakeBase + 1, sig: syscall.SIGHUP, caught: true},
		{name: "nginx USR1", pid: fakeBase + 1, sig: syscall.SIGUSR1, caught: true},
		{name: "nginx WINCH", pid: fakeBase + 1, sig: syscall.SIGWINCH, caught: true},
		{name: "nginx PIPE", pid: fakeBase + 1, sig: syscall.SIGPIPE, ignored: true},
		{name: "nginx TSTP", pid: fakeBase + 1, sig: syscall.SIGTSTP},
		{name: "nginx QUIT", pid: fakeBase + 1, sig: syscall.SIGQUIT, caught: true},
		{name: "nginx TRAP", pid: fakeBase + 1, sig: syscall.SIGTRAP},
		{name: "rtmin", pid: fakeBase + 2, sig: 34, caught: true},
		{name: "rtmax", pid: fakeBase + 2, sig: 64, caught: true},
		{name: "rt 63", pid: fakeBase + 2, sig: 63},
		{name: "bad mask", pid: fakeBase + 3, sig: syscall.SIGHUP, wantErr: "parse SigCgt"},
		{name: "no process", pid: fakeBase + 4, sig: syscall.SIGHUP, wantErrNotExists: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caught, ignored, err := Handles(root, tt.pid, tt.sig)
			switch {
			case tt.wantErrNotExists:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want fs.ErrNotExist", err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case caught != tt.caught || ignored != tt.ignored:
				t.Errorf("Handles(%s) = caught %v, ignored %v; want %v, %v", Name(tt.sig), caught, ignored, tt.caught, tt.ignored)
			}
		})
	}
}

// TestHandlesRealProcess reads the masks of a shell that traps SIGHUP and
// ignores SIGUSR1. It sends no signal but the SIGKILL that ends its own child.
func TestHandlesRealProcess(t *testing.T) {
	cmd := exec.Command("sh", "-c", `trap "" USR1; trap ": hup" HUP; while :; do sleep 0.1; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	poll.Eventually(t, 10*time.Second, func() bool {
		caught, _, err := Handles("", pid, syscall.SIGHUP)
		return err == nil && caught
	}, "waiting for the shell to trap SIGHUP")
	tests := []struct {
		sig             syscall.Signal
		caught, ignored bool
	}{
		{syscall.SIGHUP, true, false},
		{syscall.SIGUSR1, false, true},
		{syscall.SIGUSR2, false, false},
	}
	for _, tt := range tests {
		t.Run(Name(tt.sig), func(t *testing.T) {
			caught, ignored, err := Handles("", pid, tt.sig)
			if err != nil || caught != tt.caught || ignored != tt.ignored {
				t.Errorf("Handles = %v, %v, %v; want %v, %v", caught, ignored, err, tt.caught, tt.ignored)
			}
		})
	}
}
