//go:build linux

package procsignal

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Selector chooses the processes to signal. A process must match every
// selector that is set; a Selector with none set matches every process.
type Selector struct {
	// Name matches the process's comm, the base name of its executable, or
	// the base name of its argv[0]. See MatchName.
	Name string
	// Cmdline matches anywhere in the command line, the arguments joined by
	// single spaces (Process.Cmdline). Anchor it to match the whole line.
	Cmdline *regexp.Regexp
}

// Match reports whether p matches every selector that is set. Dead
// processes (zombies) never match.
func (s Selector) Match(p Process) bool {
	if p.Dead() {
		return false
	}
	if s.Name != "" && !MatchName(p, s.Name) {
		return false
	}
	if s.Cmdline != nil && (len(p.Args) == 0 || !s.Cmdline.MatchString(p.Cmdline())) {
		return false
	}
	return true
}

// Select returns the processes to signal among procs: those that match,
// are not self (the caller's own pid), and are topmost, that is whose
// parent does not match too. Of an nginx master and its workers, which all
// match ProcessName nginx, only the master is selected; two independent
// masters are both selected. The order of procs is kept.
func (s Selector) Select(procs []Process, self int) []Process {
	matched := make(map[int]bool)
	for _, p := range procs {
		if p.PID != self && s.Match(p) {
			matched[p.PID] = true
		}
	}
	var out []Process
	for _, p := range procs {
		if matched[p.PID] && !matched[p.PPID] {
			out = append(out, p)
		}
	}
	return out
}

// String describes the processes the selector matches, for messages:
// `named nginx whose command line matches "^nginx: master"`.
func (s Selector) String() string {
	var parts []string
	if s.Name != "" {
		parts = append(parts, "named "+s.Name)
	}
	if s.Cmdline != nil {
		parts = append(parts, fmt.Sprintf("whose command line matches %q", s.Cmdline.String()))
	}
	if len(parts) == 0 {
		return "of any kind"
	}
	return strings.Join(parts, " ")
}

// MatchName reports whether p is known by name, which is:
//   - its comm (names of up to 15 bytes), or
//   - the base name of its executable, or
//   - the base name of its argv[0], or
//   - for a longer name, which the kernel truncates in comm to its first 15
//     bytes: that truncated comm, when the executable cannot be read (another
//     user's process) and argv[0] does not name a different program of the
//     same prefix.
//
// Kernel threads, which have no command line, match only by comm.
func MatchName(p Process, name string) bool {
	if name == "" {
		return false
	}
	if p.Comm == name {
		return true
	}
	if p.Exe != "" && path.Base(p.Exe) == name {
		return true
	}
	argv0 := ""
	if len(p.Args) > 0 {
		argv0 = path.Base(p.Args[0])
		if argv0 == name {
			return true
		}
	}
	if len(name) <= commLen || p.Comm != name[:commLen] || len(p.Args) == 0 || p.Exe != "" {
		return false
	}
	// The executable is unknown and comm agrees with the first 15 bytes. An
	// argv[0] with the same prefix but another name contradicts it; any
	// other argv[0] may have been rewritten (as nginx does) and proves
	// nothing.
	return !strings.HasPrefix(argv0, name[:commLen])
}
