// Package procsignal reloads an application by sending it a signal, such as
// SIGHUP to nginx, through the process namespace that the containers of a
// pod share with shareProcessNamespace: true. It knows /proc and kill(2),
// nothing about files or HTTP.
//
// The target is found by name, by command line, or by a pid file; of a
// process tree that matches, only the topmost process (the nginx master,
// not its workers) is signalled. Before sending, the target's signal masks
// are read from /proc/<pid>/status, and a signal that the target does not
// handle, and that would terminate it, is not sent unless forced. A reload
// counts when the same process (pid and start time) is still alive a moment
// after the signal and, with Options.ConfirmTimeout, when a target that has
// children (nginx, HAProxy, Apache) replaced them in time, as these do on a
// reload that took and not on one whose configuration they refused. A
// signal cannot confirm more: a target without children shows nothing of
// whether it reloaded.
//
// A Go program catches every signal in its runtime, so its masks say that it
// handles SIGHUP even when it never called signal.Notify and SIGHUP ends it;
// the check after sending reports that death as a failed reload.
//
// Sending needs the target's uid, or CAP_KILL in effect, which a container
// has only when it runs as root. The package is Linux only; /proc is read
// with github.com/prometheus/procfs.
//
// It is a library: it knows nothing of hotreload's command line. A failed
// Notify is an ordinary error that wraps ErrNotSent, ErrNoProcess,
// notifier.ErrUnconfirmed or a syscall.Errno (EPERM, ESRCH), so that a
// program can advise its user in its own terms, as hotreload's
// internal/config does.
package procsignal
