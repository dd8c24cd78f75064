//go:build linux

package procsignal

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "name", opts: Options{Signal: syscall.SIGHUP, ProcessName: "nginx"}},
		{name: "cmdline", opts: Options{Signal: syscall.SIGHUP, ProcessCmdline: "^nginx: master"}},
		{name: "pid file", opts: Options{Signal: syscall.SIGUSR1, PIDFile: "/run/nginx.pid"}},
		{name: "all", opts: Options{Signal: 40, ProcessName: "a", ProcessCmdline: "b", PIDFile: "c", CheckDelay: time.Second}},
		{name: "no signal", opts: Options{ProcessName: "nginx"}, wantErr: "no signal given"},
		{name: "kill", opts: Options{Signal: syscall.SIGKILL, ProcessName: "nginx"}, wantErr: "signal 9: SIGKILL cannot be caught"},
		{name: "out of range", opts: Options{Signal: 65, ProcessName: "nginx"}, wantErr: "signal 65: unknown signal"},
		{name: "no selector", opts: Options{Signal: syscall.SIGHUP},
			wantErr: "a process name, command line or pid file is required"},
		{name: "bad regexp", opts: Options{Signal: syscall.SIGHUP, ProcessCmdline: "nginx: (master"},
			wantErr: "process command line: error parsing regexp"},
		{name: "negative delay", opts: Options{Signal: syscall.SIGHUP, ProcessName: "x", CheckDelay: -time.Second},
			wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := New(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New = %v; want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || n == nil {
				t.Fatalf("New = %v, %v", n, err)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		n, err := New(Options{Signal: syscall.SIGHUP, ProcessName: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if n.delay != defaultCheckDelay || n.procRoot != "/proc" || n.self != os.Getpid() {
			t.Errorf("delay %v, proc root %q, self %d", n.delay, n.procRoot, n.self)
		}
	})
}

func TestNotifierName(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{ProcessName: "nginx", PIDFile: "/run/nginx.pid", ProcessCmdline: "x"}, "signal:nginx"},
		{Options{PIDFile: "/run/nginx/nginx.pid", ProcessCmdline: "x"}, "signal:nginx.pid"},
		{Options{ProcessCmdline: "^nginx: master"}, "signal:cmdline"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			tt.opts.Signal = syscall.SIGHUP
			n, err := New(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestNotifyFake runs Notify against a fake proc tree in the cases where it
// must stop before sending anything. The fake pids are beyond the largest
// possible pid, so even a bug could not signal a real process.
func TestNotifyFake(t *testing.T) {
	root := t.TempDir()
	const (
		hupCaught  = "0000000000000001"
		hupIgnored = "0000000000000001"
	)
	procs := []fakeProc{
		{pid: fakeBase + 1, comm: "pause", args: []string{"/pause"}, exe: "/pause"},
		{pid: fakeBase + 2, ppid: fakeBase + 1, comm: "myapp", uid: 1000, args: []string{"/bin/myapp", "-c", "/etc/myapp"}, exe: "/bin/myapp"},
		{pid: fakeBase + 3, ppid: fakeBase + 1, comm: "nohup-app", args: []string{"nohup-app"}, sigIgn: hupIgnored},
		{pid: fakeBase + 4, ppid: fakeBase + 1, comm: "nginx", state: 'Z', sigCgt: hupCaught},
		{pid: fakeBase + 5, ppid: fakeBase + 1, comm: "twin", args: []string{"twin"}},
		{pid: fakeBase + 6, ppid: fakeBase + 1, comm: "twin", args: []string{"twin"}},
		{pid: fakeBase + 7, ppid: fakeBase + 1, comm: "catcher", args: []string{"catcher"}, sigCgt: hupCaught},
	}
	for _, p := range procs {
		writeFakeProc(t, root, p)
	}
	dir := t.TempDir()
	pidFile := func(content string) string {
		path := filepath.Join(dir, strconv.Itoa(len(content))+"-"+strconv.FormatUint(uint64(time.Now().UnixNano()), 36)+".pid")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pid := func(n int) string { return strconv.Itoa(fakeBase+n) + "\n" }
	canceled, cancel := context.WithCancel(t.Context())
	cancel()

	tests := []struct {
		name    string
		opts    Options
		ctx     context.Context
		wantErr []string // substrings, all required
		wantIs  error
	}{
		{
			name:    "no match by name",
			opts:    Options{ProcessName: "nginx"}, // only a zombie nginx
			wantErr: []string{"no process named nginx"},
		},
		{
			name:    "no match by cmdline",
			opts:    Options{ProcessCmdline: "^nginx: master"},
			wantErr: []string{`no process whose command line matches "^nginx: master"`},
		},
		{
			name: "does not handle SIGHUP",
			opts: Options{ProcessName: "myapp"},
			wantErr: []string{"pid " + strconv.Itoa(fakeBase+2) +
				" (myapp) does not handle SIGHUP and would be terminated by it: not sent"},
		},
		{
			name:    "core dump counts as terminated",
			opts:    Options{ProcessName: "myapp", Signal: syscall.SIGQUIT},
			wantErr: []string{"does not handle SIGQUIT and would be terminated by it"},
		},
		{
			name:    "stop signal",
			opts:    Options{ProcessName: "myapp", Signal: syscall.SIGTSTP},
			wantErr: []string{"does not handle SIGTSTP and would be stopped by it: not sent"},
			wantIs:  ErrNotSent,
		},
		{
			name:    "default ignore is discarded",
			opts:    Options{ProcessName: "myapp", Signal: syscall.SIGWINCH},
			wantErr: []string{"does not handle SIGWINCH and would discard it: not sent"},
			wantIs:  ErrNotSent,
		},
		{
			name:    "ignored",
			opts:    Options{ProcessName: "nohup-app"},
			wantErr: []string{"(nohup-app) ignores SIGHUP, so it would have no effect: not sent"},
			wantIs:  ErrNotSent,
		},
		{
			name:    "every target is reported",
			opts:    Options{ProcessName: "twin"},
			wantErr: []string{"pid " + strconv.Itoa(fakeBase+5) + " (twin) does not handle", "pid " + strconv.Itoa(fakeBase+6) + " (twin) does not handle"},
		},
		{
			name:    "vanishing target is looked up three times",
			opts:    Options{ProcessName: "catcher"},
			wantErr: []string{"(catcher)", "process vanished: no such process (looked up 3 times)"},
			wantIs:  syscall.ESRCH,
		},
		{
			name:    "pid file missing",
			opts:    Options{PIDFile: filepath.Join(dir, "missing.pid")},
			wantErr: []string{"read pid file: open " + filepath.Join(dir, "missing.pid")},
			wantIs:  fs.ErrNotExist,
		},
		{
			name:    "pid file empty",
			opts:    Options{PIDFile: pidFile("\n")},
			wantErr: []string{"is empty"},
		},
		{
			name:    "pid file garbage",
			opts:    Options{PIDFile: pidFile("nginx\n")},
			wantErr: []string{`"nginx" is not a pid`},
		},
		{
			name:    "pid file zero",
			opts:    Options{PIDFile: pidFile("0")},
			wantErr: []string{`"0" is not a pid`},
		},
		{
			name:    "pid file with no such process",
			opts:    Options{PIDFile: pidFile(pid(99))},
			wantErr: []string{"pid " + strconv.Itoa(fakeBase+99) + " from pid file", "no such process"},
			wantIs:  syscall.ESRCH,
		},
		{
			name:    "pid file names a zombie",
			opts:    Options{PIDFile: pidFile(pid(4))},
			wantErr: []string{"(nginx) from pid file", "has exited"},
			wantIs:  syscall.ESRCH,
		},
		{
			name:    "pid file names self",
			opts:    Options{PIDFile: pidFile(strconv.Itoa(os.Getpid()))},
			wantErr: []string{"is hotreload itself"},
		},
		{
			name:    "pid file and name disagree",
			opts:    Options{PIDFile: pidFile(pid(2)), ProcessName: "nginx"},
			wantErr: []string{"(myapp) from pid file", "is not a process named nginx"},
		},
		{
			name:    "pid file target does not handle",
			opts:    Options{PIDFile: pidFile(" " + pid(2) + "\n"), ProcessName: "myapp"},
			wantErr: []string{"(myapp) does not handle SIGHUP"},
		},
		{
			name:    "canceled",
			opts:    Options{ProcessName: "myapp"},
			ctx:     canceled,
			wantErr: []string{"context canceled"},
			wantIs:  context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.ProcRoot = root
			if opts.Signal == 0 {
				opts.Signal = syscall.SIGHUP
			}
			n, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			err = n.Notify(ctx)
			if err == nil {
				t.Fatal("Notify = nil, want an error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Notify = %q, want it to contain %q", err, want)
				}
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Notify = %q, want errors.Is %v", err, tt.wantIs)
			}
		})
	}
}

// BenchmarkChildren measures one look at the target's children, which the
// confirmation repeats every 10ms until they are replaced or the timeout.
func BenchmarkChildren(b *testing.B) {
	n, err := New(Options{Signal: syscall.SIGHUP, ProcessName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	self, err := ReadProcess("", os.Getppid())
	if err != nil {
		b.Fatal(err)
	}
	procs, err := ListProcesses("")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := n.children(self); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(procs)), "procs")
}
