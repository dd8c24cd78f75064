//go:build linux

package signal

import (
	"bufio"
	"bytes"
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

// Cmdline returns the command line as --process-cmdline sees it: the
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
	procRoot = orDefault(procRoot)
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	procs := make([]Process, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || !e.IsDir() {
			continue // self, net, sys, ...
		}
		p, err := ReadProcess(procRoot, pid)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			continue // exited since ReadDir, or hidden (hidepid)
		}
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	// os.ReadDir sorts by name: "10" before "9".
	slices.SortFunc(procs, func(a, b Process) int { return cmp.Compare(a.PID, b.PID) })
	return procs, nil
}

// ReadProcess reads one process from procRoot ("" means /proc). The error
// wraps fs.ErrNotExist when there is no such process.
func ReadProcess(procRoot string, pid int) (Process, error) {
	dir := filepath.Join(orDefault(procRoot), strconv.Itoa(pid))
	p, err := readStat(dir)
	if err != nil {
		return Process{}, err
	}
	p.UID, err = readUID(dir)
	if err != nil {
		return Process{}, err
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return Process{}, fmt.Errorf("read cmdline of pid %d: %w", pid, notExist(err))
	}
	p.Args = splitCmdline(cmdline)
	// exe needs ptrace access: without it (another user's process, no
	// CAP_SYS_PTRACE) or for a kernel thread, Exe stays empty.
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		p.Exe = strings.TrimSuffix(exe, " (deleted)")
	}
	return p, nil
}

// readStat parses dir/stat. The comm field is in parentheses and may itself
// contain spaces and parentheses, so the fields after it are found from the
// last ')'.
func readStat(dir string) (Process, error) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Process{}, fmt.Errorf("read %s: %w", shortPath(filepath.Join(dir, "stat")), notExist(err))
	}
	return parseStat(b)
}

func parseStat(b []byte) (Process, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open {
		return Process{}, fmt.Errorf("parse stat %.40q: no comm", b)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Process{}, fmt.Errorf("parse stat %.40q: pid: %w", b, err)
	}
	// fields[0] is field 3 (state), so field N is fields[N-3].
	fields := strings.Fields(string(b[closing+1:]))
	if len(fields) < 22-3+1 {
		return Process{}, fmt.Errorf("parse stat of pid %d: %d fields after comm, want at least 20", pid, len(fields))
	}
	p := Process{PID: pid, Comm: string(b[open+1 : closing])}
	if len(fields[0]) != 1 {
		return Process{}, fmt.Errorf("parse stat of pid %d: state %q", pid, fields[0])
	}
	p.State = fields[0][0]
	if p.PPID, err = strconv.Atoi(fields[4-3]); err != nil {
		return Process{}, fmt.Errorf("parse stat of pid %d: ppid: %w", pid, err)
	}
	if p.StartTime, err = strconv.ParseUint(fields[22-3], 10, 64); err != nil {
		return Process{}, fmt.Errorf("parse stat of pid %d: start time: %w", pid, err)
	}
	return p, nil
}

// splitCmdline splits /proc/<pid>/cmdline at NUL bytes. A process that
// rewrote its argv in place (nginx: "nginx: master process ...") may leave
// a single string with spaces and trailing NULs; that is kept as one
// argument, so the joined command line reads as ps shows it.
func splitCmdline(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil // kernel thread or zombie
	}
	return strings.Split(string(b), "\x00")
}

func readUID(dir string) (int, error) {
	v, err := statusField(filepath.Join(dir, "status"), "Uid")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, fmt.Errorf("parse Uid %q in %s/status", v, filepath.Base(dir))
	}
	uid, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, fmt.Errorf("parse Uid in %s/status: %w", filepath.Base(dir), err)
	}
	return uid, nil
}

// statusField returns the value of one "Key:\tvalue" line of a status file.
func statusField(path, key string) (string, error) {
	vals, err := statusFields(path, key)
	if err != nil {
		return "", err
	}
	return vals[0], nil
}

// statusFields returns the values of the given keys of a status file, in
// the order of keys. Every key must be present.
func statusFields(path string, keys ...string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", shortPath(path), notExist(err))
	}
	defer f.Close()
	vals := make([]string, len(keys))
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() && found < len(keys) {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		for i, want := range keys {
			if k == want && vals[i] == "" {
				vals[i] = strings.TrimSpace(v)
				found++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", shortPath(path), notExist(err))
	}
	for i, k := range keys {
		if vals[i] == "" {
			return nil, fmt.Errorf("read %s: no %s line", shortPath(path), k)
		}
	}
	return vals, nil
}

// Handles reports whether the process pid catches sig (it installed a
// handler) or ignores it, from the SigCgt and SigIgn masks in
// <procRoot>/<pid>/status. The error wraps fs.ErrNotExist when there is no
// such process.
func Handles(procRoot string, pid int, sig syscall.Signal) (caught, ignored bool, err error) {
	path := filepath.Join(orDefault(procRoot), strconv.Itoa(pid), "status")
	vals, err := statusFields(path, "SigCgt", "SigIgn")
	if err != nil {
		return false, false, err
	}
	if caught, err = maskHas(vals[0], sig); err != nil {
		return false, false, fmt.Errorf("parse SigCgt of pid %d: %w", pid, err)
	}
	if ignored, err = maskHas(vals[1], sig); err != nil {
		return false, false, fmt.Errorf("parse SigIgn of pid %d: %w", pid, err)
	}
	return caught, ignored, nil
}

// maskHas reports whether the hex signal mask has the bit of sig (bit N-1
// for signal N).
func maskHas(hex string, sig syscall.Signal) (bool, error) {
	m, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return false, err
	}
	if sig < 1 || sig > 64 {
		return false, nil
	}
	return m&(1<<(uint(sig)-1)) != 0, nil
}

// notExist makes ESRCH, which reading a /proc file of a process that exited
// may return, match fs.ErrNotExist.
func notExist(err error) error {
	if errors.Is(err, syscall.ESRCH) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (%w)", fs.ErrNotExist, err)
	}
	return err
}

// shortPath turns /proc/42/status into 42/status for error messages.
func shortPath(path string) string {
	return filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path))
}

func orDefault(procRoot string) string {
	if procRoot == "" {
		return DefaultProcRoot
	}
	return procRoot
}
