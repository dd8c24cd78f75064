//go:build linux

package procsignal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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

// aliases are the other names of standard signals, which
// golang.org/x/sys/unix, naming each number once, does not know.
var aliases = map[string]syscall.Signal{"IOT": syscall.SIGABRT, "CLD": syscall.SIGCHLD, "POLL": syscall.SIGIO}

// Parse reads a signal's name: a name with or without the SIG prefix
// in any case ("SIGHUP", "HUP", "hup"), a number ("1"), or a real-time
// signal ("SIGRTMIN+3", "RTMAX-1"). It rejects signals that cannot make a
// process reload: 0, SIGKILL, SIGSTOP, and 32 and 33, which the C library
// reserves for itself. Its error says what is wrong with s, and leaves it
// to the caller to name s.
func Parse(s string) (syscall.Signal, error) {
	sig, err := parse(strings.TrimSpace(s))
	if err == nil {
		err = validate(sig)
	}
	if err != nil {
		return 0, err
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
	if sig := unix.SignalNum("SIG" + name); sig != 0 {
		return sig, nil
	}
	if sig, ok := aliases[name]; ok {
		return sig, nil
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
	if name := unix.SignalName(sig); name != "" {
		return name
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
	switch sig {
	case syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGBUS, syscall.SIGFPE,
		syscall.SIGSEGV, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGSYS:
		return actCore
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		return actStop
	case syscall.SIGCONT:
		return actCont
	case syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		return actIgn
	}
	return actTerm // the others, real-time signals and anything unknown
}
