//go:build linux

package procsignal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hotreload/hotreload/notifier"
)

// Defaults of a Restarter.
const (
	// DefaultRestartGrace is Kubernetes' default terminationGracePeriodSeconds.
	DefaultRestartGrace = 30 * time.Second
	// DefaultRestartTimeout is the kubelet's longest crash-loop back-off:
	// a container that exited is started again within it.
	DefaultRestartTimeout = 5 * time.Minute
	// DefaultRestartSettle is how long a restarted app must stay up.
	DefaultRestartSettle = 2 * time.Second

	// killWait bounds the wait for a process to go after SIGKILL (one in
	// uninterruptible sleep takes a while).
	killWait = 10 * time.Second
	// restartPoll is how often the restart looks for the new process.
	restartPoll = 20 * time.Millisecond
)

// RestartOptions configure a Restarter. At least one of ProcessName,
// ProcessCmdline and PIDFile must be set; a process must match all that
// are.
type RestartOptions struct {
	ProcessName    string // see MatchName
	ProcessCmdline string // a regexp over Process.Cmdline
	PIDFile        string // read at every attempt
	// Grace is how long the app may take to exit after SIGTERM before it
	// gets SIGKILL; 0 means DefaultRestartGrace.
	Grace time.Duration
	// Timeout is how long to wait, once the app exited, for a new process
	// that matches (the kubelet's restart of the container); 0 means
	// DefaultRestartTimeout.
	Timeout time.Duration
	// Settle is how long the new process must stay alive for the restart
	// to count; 0 means DefaultRestartSettle.
	Settle time.Duration
	// Drain is how long the Restarter reports Draining before it ends the
	// app, so that the pod's readiness (the sidecar's readiness probe on
	// /-/ready) takes it out of its Services first; 0 ends it at once.
	Drain time.Duration
	// ProcRoot is where proc is mounted; "" means /proc.
	ProcRoot string
}

// Restarter restarts the app's container in place: through the process
// namespace that the containers of a pod share (shareProcessNamespace:
// true), it sends the app's main process SIGTERM, then SIGKILL after the
// grace period, and the kubelet starts the container again in the same pod
// (same IP, same volumes, same emptyDirs). It is a notifier.Target: a
// restart is a reload like any other, and it succeeds when a new process
// that matches runs and stays up for Settle.
//
// A restarted app that exits again within Settle, or that the kubelet does
// not start again within Timeout, refused the new configuration: the error
// is a notifier.ErrRefused, so that the previous configuration can be put
// back before the kubelet's next attempt reads it.
type Restarter struct {
	n       *Notifier // finds the process, sends and watches
	grace   time.Duration
	timeout time.Duration
	settle  time.Duration
	drain   time.Duration

	draining atomic.Bool
}

var _ notifier.Target = (*Restarter)(nil)

// NewRestarter checks opts and returns a Restarter.
func NewRestarter(opts RestartOptions) (*Restarter, error) {
	for name, d := range map[string]time.Duration{"grace period": opts.Grace, "timeout": opts.Timeout, "settle time": opts.Settle, "drain time": opts.Drain} {
		if d < 0 {
			return nil, fmt.Errorf("restart %s %v: must not be negative", name, d)
		}
	}
	if opts.ProcessName == "" && opts.ProcessCmdline == "" && opts.PIDFile == "" {
		return nil, errors.New("a restart needs the app's main process: a process name, command line or pid file")
	}
	n, err := New(Options{
		Signal:         syscall.SIGTERM,
		ProcessName:    opts.ProcessName,
		ProcessCmdline: opts.ProcessCmdline,
		PIDFile:        opts.PIDFile,
		Force:          true, // SIGTERM is meant to end it
		ProcRoot:       opts.ProcRoot,
	})
	if err != nil {
		return nil, err
	}
	r := &Restarter{n: n, grace: opts.Grace, timeout: opts.Timeout, settle: opts.Settle, drain: opts.Drain}
	if r.grace == 0 {
		r.grace = DefaultRestartGrace
	}
	if r.timeout == 0 {
		r.timeout = DefaultRestartTimeout
	}
	if r.settle == 0 {
		r.settle = DefaultRestartSettle
	}
	return r, nil
}

// Draining reports whether a restart is under way with a drain time: from
// the drain's start until the restart ends, the sidecar reports not Ready,
// so that the pod leaves its Services' endpoints before the app stops
// (make compare measured the requests a restart without it loses).
func (r *Restarter) Draining() bool { return r.draining.Load() }

// Name returns the target's name for logs and metric labels:
// "restart:app" after ProcessName, else "restart:" and the base name of
// the pid file, else "restart:cmdline".
func (r *Restarter) Name() string {
	switch {
	case r.n.sel.Name != "":
		return "restart:" + r.n.sel.Name
	case r.n.pidFile != "":
		return "restart:" + filepath.Base(r.n.pidFile)
	}
	return "restart:cmdline"
}

// Notify restarts the app once: it finds its main process, drains the pod
// (Draining for the drain time), ends it (SIGTERM, then SIGKILL after the
// grace period), and waits for the kubelet's new one to run and stay up.
func (r *Restarter) Notify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.drain > 0 {
		// Only when there is an app to restart: a pod is not taken out
		// of its Services for a restart that cannot happen.
		if _, err := r.find(); err != nil {
			return err
		}
		r.draining.Store(true)
		defer r.draining.Store(false)
		t := time.NewTimer(r.drain)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	old, err := r.stop(ctx)
	if err != nil {
		return err
	}
	return r.waitNew(ctx, old)
}

// stop ends the app's main process and returns it.
func (r *Restarter) stop(ctx context.Context) (Process, error) {
	for lookup := 1; ; lookup++ {
		p, err := r.find()
		if err != nil {
			return Process{}, err
		}
		err = r.end(ctx, p)
		if errors.Is(err, errVanished) && lookup < maxLookups {
			continue // it exited between lookup and kill: look again
		}
		return p, err
	}
}

// find returns the one process to restart.
func (r *Restarter) find() (Process, error) {
	procs, err := r.n.find()
	if err != nil {
		return Process{}, err // ErrNoProcess: the caller's hint says shareProcessNamespace: true
	}
	if len(procs) > 1 {
		return Process{}, fmt.Errorf("%d processes %s: a restart needs the app's main process alone; name it by its command line or a pid file", len(procs), r.n.sel)
	}
	p := procs[0]
	if p.PID == 1 {
		return Process{}, fmt.Errorf("%s is pid 1, the pod's pause process or the namespace's init: it cannot be restarted; name the app's main process", p)
	}
	return p, nil
}

// end sends p SIGTERM and, if it is still alive after the grace period,
// SIGKILL, and waits for it to be gone.
func (r *Restarter) end(ctx context.Context, p Process) error {
	send, release, err := r.n.sender(p)
	if err != nil {
		return err
	}
	defer release()
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGTERM, r.grace}, {syscall.SIGKILL, killWait}} {
		switch err := send(step.sig); {
		case errors.Is(err, syscall.ESRCH):
			if step.sig == syscall.SIGTERM {
				return fmt.Errorf("send SIGTERM to %s: %w: %w", p, errVanished, err)
			}
			return nil // gone in the meantime
		case errors.Is(err, syscall.EPERM):
			return fmt.Errorf("send %s to pid %d (%s, uid %d): %w: %s", Name(step.sig), p.PID, p.Comm, p.UID, err, r.n.permHint(p))
		case err != nil:
			return fmt.Errorf("send %s to %s: %w", Name(step.sig), p, err)
		}
		gone, err := r.poll(ctx, step.wait, func() bool { return !r.n.same(p) })
		if err != nil {
			return fmt.Errorf("wait for %s to exit: %w", p, err)
		}
		if gone {
			return nil
		}
	}
	return fmt.Errorf("%s is still alive %s after SIGKILL", p, killWait)
}

// waitNew waits for a new process that matches, then for it to stay up.
func (r *Restarter) waitNew(ctx context.Context, old Process) error {
	var p Process
	found, err := r.poll(ctx, r.timeout, func() bool {
		procs, err := r.n.find()
		if err != nil {
			return false // not there yet, or a pid file not rewritten yet
		}
		for _, c := range procs {
			if c.PID != old.PID || c.StartTime != old.StartTime {
				p = c
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("wait for the app to start again: %w", err)
	}
	if !found {
		hint := ""
		if old.PPID != 0 {
			hint = fmt.Sprintf(" (%s's parent, pid %d, is in this PID namespace: a container's main process has none there; if the parent is the main process, name it instead)", old, old.PPID)
		}
		err := fmt.Errorf("%s exited, but no new process matched within %s: the kubelet did not start the app again, or it exits at once with the new configuration%s", old, r.timeout, hint)
		return notifier.Refused(err, fmt.Sprintf("the app did not run again within %s of its restart", r.timeout))
	}
	died, err := r.poll(ctx, r.settle, func() bool { return !r.n.same(p) })
	if err != nil {
		return fmt.Errorf("watch the restarted app: %w", err)
	}
	if died {
		err := fmt.Errorf("the restarted app, %s, exited within %s: the new configuration was probably refused; see the app's log", p, r.settle)
		return notifier.Refused(err, fmt.Sprintf("the restarted app exited within %s", r.settle))
	}
	return nil
}

// poll calls cond every restartPoll until it returns true (true), timeout
// passes (false) or ctx is done (its error).
func (r *Restarter) poll(ctx context.Context, timeout time.Duration, cond func() bool) (bool, error) {
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
		}
		if cond() {
			return true, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		timer.Reset(min(left, restartPoll))
	}
}
