//go:build linux

package procsignal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/hotreload/hotreload/notifier"
)

const (
	defaultCheckDelay = 100 * time.Millisecond
	// pollInterval is how often the target is looked at during CheckDelay.
	pollInterval = 10 * time.Millisecond
	// confirmInterval is how often its children are looked at after
	// CheckDelay: each look reads the stat of every process (about 25µs
	// each), and a reload takes far longer than this to replace them.
	confirmInterval = 100 * time.Millisecond
	// maxLookups bounds how often one Notify looks for the target again
	// after it vanished between lookup and kill.
	maxLookups = 3
)

// Options configure a Notifier. At least one of ProcessName, ProcessCmdline
// and PIDFile must be set; a process must match all that are.
type Options struct {
	Signal         syscall.Signal
	ProcessName    string // see MatchName
	ProcessCmdline string // a regexp over Process.Cmdline
	PIDFile        string // read at every attempt
	// Force sends the signal even when the target does not handle it and
	// would be terminated, stopped, or left unaffected by it.
	// A program that takes the signal with sigwait(2) or a signalfd(2)
	// neither catches nor ignores it, and needs Force.
	Force bool
	// CheckDelay is how long after sending the same process must still be
	// alive for the reload to count; 0 means 100ms.
	CheckDelay time.Duration
	// ConfirmTimeout, when positive, is how long to wait after sending for
	// a target that has children (nginx, HAProxy and Apache workers) to
	// replace them, as those apps do on a reload that took and not on one
	// that failed. The reload counts once one
	// of the children seen at signal time is gone and a new one exists;
	// else it fails when ConfirmTimeout is over. A target without
	// children cannot show that it reloaded and counts as reloaded when it
	// is alive after CheckDelay. 0 does not check.
	ConfirmTimeout time.Duration
	// ProcRoot is where proc is mounted; "" means /proc. Notify sends real
	// signals to the pids found there, so anything but the proc of the
	// current PID namespace is for tests that never call Notify.
	ProcRoot string
}

// Notifier reloads a process by sending it a signal, typically SIGHUP to a
// process in another container of a pod with shareProcessNamespace: true.
// It is safe for concurrent use.
type Notifier struct {
	sig      syscall.Signal
	sel      Selector
	pidFile  string
	force    bool
	delay    time.Duration
	confirm  time.Duration // ConfirmTimeout
	procRoot string
	self     int

	// beforeSend, when set, runs after the checks and right before the
	// signal is sent; tests use it to make the target vanish.
	beforeSend func(Process)
}

var _ notifier.Target = (*Notifier)(nil)

// New checks opts and returns a Notifier.
func New(opts Options) (*Notifier, error) {
	if opts.Signal == 0 {
		return nil, errors.New("no signal given")
	}
	if err := validate(opts.Signal); err != nil {
		return nil, fmt.Errorf("signal %d: %w", int(opts.Signal), err)
	}
	if opts.ProcessName == "" && opts.ProcessCmdline == "" && opts.PIDFile == "" {
		return nil, errors.New("a process name, command line or pid file is required")
	}
	if opts.CheckDelay < 0 {
		return nil, fmt.Errorf("check delay %v: must not be negative", opts.CheckDelay)
	}
	if opts.ConfirmTimeout < 0 {
		return nil, fmt.Errorf("confirm timeout %v: must not be negative", opts.ConfirmTimeout)
	}
	if _, err := procfs.NewFS(orDefault(opts.ProcRoot)); err != nil {
		return nil, fmt.Errorf("signalling needs the proc filesystem: %w", err)
	}
	n := &Notifier{
		sig:      opts.Signal,
		sel:      Selector{Name: opts.ProcessName},
		pidFile:  opts.PIDFile,
		force:    opts.Force,
		delay:    opts.CheckDelay,
		confirm:  opts.ConfirmTimeout,
		procRoot: orDefault(opts.ProcRoot),
		self:     os.Getpid(),
	}
	if n.delay == 0 {
		n.delay = defaultCheckDelay
	}
	if opts.ProcessCmdline != "" {
		re, err := regexp.Compile(opts.ProcessCmdline)
		if err != nil {
			return nil, fmt.Errorf("process command line: %w", err)
		}
		n.sel.Cmdline = re
	}
	return n, nil
}

// Name returns the target's name for logs and metric labels:
// "signal:nginx" after ProcessName, else "signal:" and the base name of
// the pid file, else "signal:cmdline".
func (n *Notifier) Name() string {
	switch {
	case n.sel.Name != "":
		return "signal:" + n.sel.Name
	case n.pidFile != "":
		return "signal:" + filepath.Base(n.pidFile)
	}
	return "signal:cmdline"
}

// errVanished marks a target that exited between lookup and kill.
var errVanished = errors.New("process vanished")

// Notify makes one reload attempt: it finds the target processes, checks
// that each handles the signal, sends it, and waits CheckDelay to see that
// each is still alive. It returns nil only if every target was signalled
// and survived. A target that exits between lookup and kill is looked up
// again, up to three times. When several targets fail, the error joins
// their errors.
func (n *Notifier) Notify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	type key struct {
		pid   int
		start uint64
	}
	done := make(map[key]bool)
	var errs []error
	for lookup := 1; ; lookup++ {
		targets, err := n.find()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		var vanished error
		for _, p := range targets {
			k := key{p.PID, p.StartTime}
			if done[k] {
				continue
			}
			err := n.signal(ctx, p)
			if errors.Is(err, errVanished) {
				vanished = err
				continue
			}
			done[k] = true
			if err != nil {
				errs = append(errs, err)
			}
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
		}
		if vanished == nil {
			break
		}
		if lookup == maxLookups {
			errs = append(errs, fmt.Errorf("%w (looked up %d times)", vanished, maxLookups))
			break
		}
	}
	return errors.Join(errs...)
}

// find returns the processes to signal.
func (n *Notifier) find() ([]Process, error) {
	if n.pidFile != "" {
		return n.fromPIDFile()
	}
	procs, err := ListProcesses(n.procRoot)
	if err != nil {
		return nil, err
	}
	targets := n.sel.Select(procs, n.self)
	if len(targets) == 0 {
		return nil, fmt.Errorf("%w %s", ErrNoProcess, n.sel)
	}
	return targets, nil
}

// fromPIDFile reads the pid file and returns its process, which must match
// the other selectors if any are set.
func (n *Notifier) fromPIDFile() ([]Process, error) {
	b, err := os.ReadFile(n.pidFile)
	if err != nil {
		return nil, fmt.Errorf("read pid file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, fmt.Errorf("pid file %s is empty", n.pidFile)
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("pid file %s: %.20q is not a pid", n.pidFile, s)
	}
	if pid == n.self {
		return nil, fmt.Errorf("pid file %s: pid %d is hotreload itself", n.pidFile, pid)
	}
	p, err := ReadProcess(n.procRoot, pid)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pid %d from pid file %s: %w", pid, n.pidFile, syscall.ESRCH)
	}
	if err != nil {
		return nil, err
	}
	if p.Dead() {
		return nil, fmt.Errorf("%s from pid file %s has exited: %w", p, n.pidFile, syscall.ESRCH)
	}
	if !n.sel.Match(p) {
		return nil, fmt.Errorf("%s from pid file %s is not a process %s", p, n.pidFile, n.sel)
	}
	return []Process{p}, nil
}

// signal checks, signals and watches one target. The error wraps
// errVanished when the target was gone before the signal reached it.
func (n *Notifier) signal(ctx context.Context, p Process) error {
	name := Name(n.sig)
	if !n.force {
		if err := n.checkHandles(p); err != nil {
			return err
		}
	}
	send, release, err := n.sender(p)
	if err != nil {
		return err
	}
	defer release()
	// The children at signal time, whose replacement confirms the reload.
	var kids map[procKey]bool
	if n.confirm > 0 {
		if kids, err = n.children(p); err != nil {
			return fmt.Errorf("list children of %s: %w", p, err)
		}
	}
	if n.beforeSend != nil {
		n.beforeSend(p)
	}
	switch err := send(n.sig); {
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("send %s to %s: %w: %w", name, p, errVanished, err)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("send %s to pid %d (%s, uid %d): %w: %s", name, p.PID, p.Comm, p.UID, err, n.permHint(p))
	case err != nil:
		return fmt.Errorf("send %s to %s: %w", name, p, err)
	}
	return n.watch(ctx, p, kids)
}

// permHint says what lets hotreload signal p: the kernel lets a process
// signal another of the same uid, or any with CAP_KILL in effect. A
// container that is not root and adds KILL gets it in its bounding set
// only, never in effect, so that does not help.
func (n *Notifier) permHint(p Process) string {
	hint := fmt.Sprintf("run hotreload as the target's uid (securityContext.runAsUser: %d), "+
		"or as root with every capability dropped but KILL (runAsUser: 0, capabilities drop [ALL] add [KILL])", p.UID)
	if p.UID == 0 {
		hint = "run hotreload as root like the target, with every capability dropped but KILL " +
			"(securityContext.runAsUser: 0, capabilities drop [ALL] add [KILL])"
	}
	if eff, bnd, err := threadCaps(n.procRoot); err == nil && eff&capKill == 0 && bnd&capKill != 0 {
		hint += "; hotreload has KILL in its bounding set only, not in effect (CapEff), " +
			"as a container that is not root gets it from capabilities add [KILL]"
	}
	return hint
}

// checkHandles refuses a signal that would not make p reload.
func (n *Notifier) checkHandles(p Process) error {
	name := Name(n.sig)
	// A process that takes the signal with sigwait(2) or a signalfd(2)
	// blocks it instead of catching it. Its SigBlk is no proof: shells,
	// posix_spawn and pthread_create block every signal for a moment, so a
	// process seen blocking it may die of it a moment later. Such a process
	// needs Force.
	caught, ignored, err := Handles(n.procRoot, p.PID, n.sig)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("check %s: %w", p, errVanished)
	case err != nil:
		return fmt.Errorf("check %s: %w", p, err)
	case caught:
		return nil
	case ignored:
		return fmt.Errorf("%s ignores %s, so it would have no effect: %w", p, name, ErrNotSent)
	}
	what := "would be terminated by it"
	switch defaultAction(n.sig) {
	case actStop:
		what = "would be stopped by it"
	case actIgn, actCont:
		what = "would discard it"
	}
	return fmt.Errorf("%s does not handle %s and %s: %w", p, name, what, ErrNotSent)
}

// sender returns a function that sends a signal to p and nothing else. It
// holds a pidfd when the kernel has them (Linux 5.3), so that a pid reused
// after the checks cannot receive the signal; it falls back to kill(2).
// The process is checked to still be p (same start time, not a zombie).
func (n *Notifier) sender(p Process) (send func(syscall.Signal) error, release func(), err error) {
	fd, err := unix.PidfdOpen(p.PID, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return nil, nil, fmt.Errorf("send %s to %s: %w: %w", Name(n.sig), p, errVanished, err)
	case err != nil:
		fd = -1 // ENOSYS or a seccomp filter: use kill(2)
	}
	release = func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if !n.same(p) {
		release()
		return nil, nil, fmt.Errorf("send %s to %s: %w", Name(n.sig), p, errVanished)
	}
	send = func(sig syscall.Signal) error {
		if fd >= 0 {
			return unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		return syscall.Kill(p.PID, sig)
	}
	return send, release, nil
}

// same reports whether p is still alive: the process with its pid has its
// start time and is not a zombie.
func (n *Notifier) same(p Process) bool {
	pfs, err := n.proc()
	if err != nil {
		return false
	}
	pp, err := pfs.Proc(p.PID)
	if err != nil {
		return false
	}
	now, err := readStat(pp)
	return err == nil && now.StartTime == p.StartTime && !now.Dead()
}

// proc returns the proc filesystem. It is made at every use rather than
// kept in the Notifier, whose type reaches reflection through
// notifier.Target: kept, it would link every method of procfs.FS (400 kB).
func (n *Notifier) proc() (procfs.FS, error) { return procfs.NewFS(n.procRoot) }

// procKey identifies a process: a pid may be reused, the pair cannot.
type procKey struct {
	pid   int
	start uint64
}

// children returns the live children of p.
func (n *Notifier) children(p Process) (map[procKey]bool, error) {
	pfs, err := n.proc()
	if err != nil {
		return nil, err
	}
	all, err := pfs.AllProcs()
	if err != nil {
		return nil, err
	}
	kids := make(map[procKey]bool)
	for _, pp := range all {
		c, err := readStat(pp)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if c.PPID == p.PID && !c.Dead() {
			kids[procKey{c.PID, c.StartTime}] = true
		}
	}
	return kids, nil
}

// replaced reports whether p replaced its children: one of old is gone
// and a child that is not in old exists.
func (n *Notifier) replaced(p Process, old map[procKey]bool) (bool, error) {
	now, err := n.children(p)
	if err != nil {
		return false, err
	}
	gone := false
	for k := range old {
		if !now[k] {
			gone = true
			break
		}
	}
	for k := range now {
		if gone && !old[k] {
			return true, nil
		}
	}
	return false, nil
}

// watch waits CheckDelay and fails as soon as p is seen dead. When kids
// holds p's children at signal time, it then waits up to ConfirmTimeout for
// p to replace them.
func (n *Notifier) watch(ctx context.Context, p Process, kids map[procKey]bool) error {
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if !n.same(p) {
			return fmt.Errorf("%s exited after %s", p, Name(n.sig))
		}
		elapsed := time.Since(start)
		left := n.delay - elapsed
		if left <= 0 {
			if len(kids) == 0 {
				return nil
			}
			ok, err := n.replaced(p, kids)
			switch {
			case err != nil:
				return fmt.Errorf("list children of %s: %w", p, err)
			case ok:
				return nil
			case elapsed >= n.confirm:
				return &keptWorkersError{p}
			}
			left = min(n.confirm-elapsed, confirmInterval)
		} else {
			left = min(left, pollInterval)
		}
		timer.Reset(left)
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s after %s: %w", p, Name(n.sig), ctx.Err())
		case <-timer.C:
		}
	}
}

// keptWorkersError is a signal that p took, without replacing its
// children as a reload that took does. It is a notifier.ErrUnconfirmed.
type keptWorkersError struct{ p Process }

func (e *keptWorkersError) Error() string {
	return fmt.Sprintf("signal delivered but %s kept its workers: the new config was probably refused; see the app's log", e.p)
}

func (e *keptWorkersError) Unwrap() error { return notifier.ErrUnconfirmed }
