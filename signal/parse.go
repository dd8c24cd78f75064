//go:build linux

package signal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// The real-time signals as the C library numbers them: glibc and musl keep
// 32 and 33 for themselves, so SIGRTMIN is 34 in every process that a user
// would name a real-time signal for.
const (
	sigRTMin = syscall.Signal(34)
	sigRTMax = syscall.Signal(64)
)

// action is the kernel's default action for a signal, see signal(7).
type action int

const (
	actTerm action = iota // terminate
	actCore               // terminate and dump core
	actStop               // stop
	actCont               // continue if stopped
	actIgn                // ignore
)

// signalTable lists the standard signals with their names (without the SIG
// prefix) and default actions. Aliases follow the signal they name.
var signalTable = [...]struct {
	name string
	sig  syscall.Signal
	act  action
}{
	{"HUP", syscall.SIGHUP, actTerm},
	{"INT", syscall.SIGINT, actTerm},
	{"QUIT", syscall.SIGQUIT, actCore},
	{"ILL", syscall.SIGILL, actCore},
	{"TRAP", syscall.SIGTRAP, actCore},
	{"ABRT", syscall.SIGABRT, actCore},
	{"IOT", syscall.SIGIOT, actCore},
	{"BUS", syscall.SIGBUS, actCore},
	{"FPE", syscall.SIGFPE, actCore},
	{"KILL", syscall.SIGKILL, actTerm},
	{"USR1", syscall.SIGUSR1, actTerm},
	{"SEGV", syscall.SIGSEGV, actCore},
	{"USR2", syscall.SIGUSR2, actTerm},
	{"PIPE", syscall.SIGPIPE, actTerm},
	{"ALRM", syscall.SIGALRM, actTerm},
	{"TERM", syscall.SIGTERM, actTerm},
	{"STKFLT", syscall.SIGSTKFLT, actTerm},
	{"CHLD", syscall.SIGCHLD, actIgn},
	{"CLD", syscall.SIGCLD, actIgn},
	{"CONT", syscall.SIGCONT, actCont},
	{"STOP", syscall.SIGSTOP, actStop},
	{"TSTP", syscall.SIGTSTP, actStop},
	{"TTIN", syscall.SIGTTIN, actStop},
	{"TTOU", syscall.SIGTTOU, actStop},
	{"URG", syscall.SIGURG, actIgn},
	{"XCPU", syscall.SIGXCPU, actCore},
	{"XFSZ", syscall.SIGXFSZ, actCore},
	{"VTALRM", syscall.SIGVTALRM, actTerm},
	{"PROF", syscall.SIGPROF, actTerm},
	{"WINCH", syscall.SIGWINCH, actIgn},
	{"IO", syscall.SIGIO, actTerm},
	{"POLL", syscall.SIGPOLL, actTerm},
	{"PWR", syscall.SIGPWR, actTerm},
	{"SYS", syscall.SIGSYS, actCore},
}

// Parse reads the value of --signal: a name with or without the SIG prefix
// in any case ("SIGHUP", "HUP", "hup"), a number ("1"), or a real-time
// signal ("SIGRTMIN+3", "RTMAX-1"). It rejects signals that cannot make a
// process reload: 0, SIGKILL, SIGSTOP, and 32 and 33, which the C library
// reserves for itself.
func Parse(s string) (syscall.Signal, error) {
	sig, err := parse(strings.TrimSpace(s))
	if err == nil {
		err = validate(sig)
	}
	if err != nil {
		return 0, fmt.Errorf("--signal %q: %w", s, err)
	}
	return sig, nil
}

var errUnknown = errors.New("unknown signal")

func parse(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	name = strings.TrimPrefix(name, "SIG")
	for _, e := range signalTable {
		if e.name == name {
			return e.sig, nil
		}
	}
	for _, rt := range [...]struct {
		prefix string
		base   syscall.Signal
		dir    int
	}{{"RTMIN", sigRTMin, 1}, {"RTMAX", sigRTMax, -1}} {
		rest, ok := strings.CutPrefix(name, rt.prefix)
		if !ok {
			continue
		}
		if rest == "" {
			return rt.base, nil
		}
		sign := "+"
		if rt.dir < 0 {
			sign = "-"
		}
		digits, ok := strings.CutPrefix(rest, sign)
		if !ok {
			return 0, errUnknown
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n < 0 || n > int(sigRTMax-sigRTMin) {
			return 0, fmt.Errorf("%w: real-time signals go from SIGRTMIN (%d) to SIGRTMAX (%d)", errUnknown, sigRTMin, sigRTMax)
		}
		return rt.base + syscall.Signal(rt.dir*n), nil
	}
	return 0, errUnknown
}

// validate says why sig cannot be used to ask a process to reload, or nil.
func validate(sig syscall.Signal) error {
	switch {
	case sig == 0:
		return errors.New("signal 0 only probes a process, it delivers nothing")
	case sig < 0 || sig > sigRTMax:
		return fmt.Errorf("%w: numbers go from 1 to %d", errUnknown, sigRTMax)
	case sig == syscall.SIGKILL, sig == syscall.SIGSTOP:
		return fmt.Errorf("%s cannot be caught, so no process can reload on it", Name(sig))
	case sig > 31 && sig < sigRTMin:
		return fmt.Errorf("signal %d is reserved by the C library", int(sig))
	}
	return nil
}

// Name returns the conventional name of sig: "SIGHUP", "SIGRTMIN+3",
// "SIGRTMAX-1", or "signal N" for numbers without a name.
func Name(sig syscall.Signal) string {
	for _, e := range signalTable {
		if e.sig == sig {
			return "SIG" + e.name
		}
	}
	switch {
	case sig == sigRTMin:
		return "SIGRTMIN"
	case sig == sigRTMax:
		return "SIGRTMAX"
	case sig > sigRTMin && sig <= sigRTMin+(sigRTMax-sigRTMin)/2:
		return fmt.Sprintf("SIGRTMIN+%d", int(sig-sigRTMin))
	case sig > sigRTMin && sig < sigRTMax:
		return fmt.Sprintf("SIGRTMAX-%d", int(sigRTMax-sig))
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// defaultAction returns what the kernel does with sig when the process
// neither catches, ignores nor blocks it.
func defaultAction(sig syscall.Signal) action {
	for _, e := range signalTable {
		if e.sig == sig {
			return e.act
		}
	}
	return actTerm // real-time signals and anything unknown
}
