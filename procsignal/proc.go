//go:build linux

package procsignal

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// DefaultProcRoot is where the proc filesystem of the current PID namespace
// is mounted.
const DefaultProcRoot = "/proc"

// commLen is the kernel's limit on a process's comm (TASK_COMM_LEN - 1).
const commLen = 15

// Process is what the selectors and the safety check need to know about one
// process, read from /proc/<pid>.
type Process struct {
	PID   int
	PPID  int
	Comm  string // the kernel's name for it: the executable's base name, at most 15 bytes
	Exe   string // target of /proc/<pid>/exe; "" when not readable (another user's process, kernel thread)
	Args  []string
	State byte // R, S, D, Z (zombie), X (dead), T, t, I, ...
	// StartTime is field 22 of /proc/<pid>/stat, the start time in clock
	// ticks after boot. With PID it identifies a process: a pid can be reused,
	// the pair cannot.
	StartTime uint64
	UID       int // real user id
}

// Cmdline returns the command line as Options.ProcessCmdline sees it: the
// arguments joined by single spaces.
func (p Process) Cmdline() string { return strings.Join(p.Args, " ") }

// Dead reports whether the process has exited (a zombie counts as dead).
func (p Process) Dead() bool { return p.State == 'Z' || p.State == 'X' }

// String returns "pid 42 (nginx)".
func (p Process) String() string { return fmt.Sprintf("pid %d (%s)", p.PID, p.Comm) }

// ListProcesses reads every process under procRoot ("" means /proc).
// Processes that exit while they are being read, and those that a proc
// mounted with hidepid does not let us read, are left out. The result is
// ordered by pid.
func ListProcesses(procRoot string) ([]Process, error) {
	pfs, err := procfs.NewFS(orDefault(procRoot))
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return listProcesses(pfs)
}

func listProcesses(pfs procfs.FS) ([]Process, error) {
	all, err := pfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	procs := make([]Process, 0, len(all))
	for _, pp := range all {
		if pp.PID <= 0 {
			continue
		}
		p, err := readProcess(pfs, pp.PID)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) {
			continue // exited since the listing, or hidden (hidepid)
		}
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	slices.SortFunc(procs, func(a, b Process) int { return cmp.Compare(a.PID, b.PID) })
	return procs, nil
}

// ReadProcess reads one process from procRoot ("" means /proc). The error
// wraps fs.ErrNotExist when there is no such process.
func ReadProcess(procRoot string, pid int) (Process, error) {
	pfs, err := procfs.NewFS(orDefault(procRoot))
	if err != nil {
		return Process{}, fmt.Errorf("read pid %d: %w", pid, err)
	}
	return readProcess(pfs, pid)
}

func readProcess(pfs procfs.FS, pid int) (Process, error) {
	pp, err := pfs.Proc(pid)
	if err != nil {
		return Process{}, fmt.Errorf("read pid %d: %w", pid, notExist(err))
	}
	p, err := readStat(pp)
	if err != nil {
		return Process{}, err
	}
	status, err := pp.NewStatus()
	if err != nil {
		return Process{}, fmt.Errorf("read status of pid %d: %w", pid, notExist(err))
	}
	p.UID = int(status.UIDs[0])
	if p.Args, err = pp.CmdLine(); err != nil {
		return Process{}, fmt.Errorf("read cmdline of pid %d: %w", pid, notExist(err))
	}
	if len(p.Args) == 0 {
		p.Args = nil // kernel thread or zombie
	}
	// exe needs ptrace access: without it (another user's process, no
	// CAP_SYS_PTRACE) or for a kernel thread, Exe stays empty.
	if exe, err := pp.Executable(); err == nil {
		p.Exe = strings.TrimSuffix(exe, " (deleted)")
	}
	return p, nil
}

// readStat reads the fields of /proc/<pid>/stat that identify a process.
func readStat(pp procfs.Proc) (Process, error) {
	pid := pp.PID
	st, err := pp.Stat()
	if err != nil {
		return Process{}, fmt.Errorf("read stat of pid %d: %w", pid, notExist(err))
	}
	if len(st.State) != 1 {
		return Process{}, fmt.Errorf("read stat of pid %d: state %q", pid, st.State)
	}
	return Process{PID: st.PID, PPID: st.PPID, Comm: st.Comm, State: st.State[0], StartTime: st.Starttime}, nil
}

// Handles reports whether the process pid catches sig (it installed a
// handler) or ignores it, from the SigCgt and SigIgn masks in
// <procRoot>/<pid>/status, which procfs does not parse. The error wraps
// fs.ErrNotExist when there is no such process.
func Handles(procRoot string, pid int, sig syscall.Signal) (caught, ignored bool, err error) {
	path := filepath.Join(orDefault(procRoot), strconv.Itoa(pid), "status")
	f, err := os.Open(path)
	if err != nil {
		return false, false, fmt.Errorf("read status of pid %d: %w", pid, notExist(err))
	}
	defer f.Close()
	masks := map[string]*bool{"SigCgt": &caught, "SigIgn": &ignored}
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() && found < len(masks) {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if dst, ok := masks[k]; ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, false, fmt.Errorf("parse %s of pid %d: %w", k, pid, err)
			}
			*dst = sig >= 1 && sig <= 64 && m&(1<<(uint(sig)-1)) != 0
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return false, false, fmt.Errorf("read status of pid %d: %w", pid, notExist(err))
	}
	if found < len(masks) {
		return false, false, fmt.Errorf("read status of pid %d: no SigCgt or SigIgn line", pid)
	}
	return caught, ignored, nil
}

// capKill is CAP_KILL's bit in a capability mask.
const capKill = 1 << 5

// threadCaps returns the effective and bounding capabilities of the
// calling thread, which are the ones kill(2) goes by: a thread can differ
// from the rest of its process.
func threadCaps(procRoot string) (eff, bnd uint64, err error) {
	pfs, err := procfs.NewFS(orDefault(procRoot))
	if err != nil {
		return 0, 0, err
	}
	t, err := pfs.Thread(os.Getpid(), unix.Gettid())
	if err != nil {
		return 0, 0, err
	}
	st, err := t.NewStatus()
	if err != nil {
		return 0, 0, err
	}
	return st.CapEff, st.CapBnd, nil
}

// notExist makes ESRCH, which reading a /proc file of a process that exited
// may return, match fs.ErrNotExist.
func notExist(err error) error {
	if errors.Is(err, syscall.ESRCH) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (%w)", fs.ErrNotExist, err)
	}
	return err
}

func orDefault(procRoot string) string {
	if procRoot == "" {
		return DefaultProcRoot
	}
	return procRoot
}
