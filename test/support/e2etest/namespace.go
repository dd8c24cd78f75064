//go:build linux

package e2etest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
)

// envNamespace marks the test binary that InPIDNamespace re-runs inside a
// PID namespace. It does not start with HOTRELOAD_, which hotreload reads
// its flags from, since a hotreload started inside inherits it.
const envNamespace = "E2ETEST_IN_PID_NAMESPACE"

// namespaceTimeout bounds a whole test run inside a PID namespace.
const namespaceTimeout = 3 * time.Minute

var unshareCheck struct {
	once  sync.Once
	path  string
	flags []string
	err   error
}

// unshare returns the path of unshare(1) and the flags with which it made
// a PID namespace here, or why it cannot. Root makes the PID namespace
// directly; a normal user makes a user namespace first, where it keeps its
// own uid (util-linux 2.38) or, with an older unshare, becomes a root that
// has no other uid. --kill-child kills what is left in the namespace when
// the test binary inside exits.
func unshare() (string, []string, error) {
	c := &unshareCheck
	c.once.Do(func() {
		c.path, c.err = exec.LookPath("unshare")
		if c.err != nil {
			c.err = fmt.Errorf("unshare(1) not found, cannot make a PID namespace: %w", c.err)
			return
		}
		candidates := [][]string{{"--pid", "--fork", "--mount-proc", "--kill-child"}}
		if os.Geteuid() != 0 {
			candidates = [][]string{
				{"--user", "--map-current-user", "--pid", "--fork", "--mount-proc", "--kill-child"},
				{"--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child"},
			}
		}
		var tried []string
		for _, f := range candidates {
			out, err := exec.Command(c.path, append(f, "true")...).CombinedOutput()
			if err == nil {
				c.flags = f
				return
			}
			tried = append(tried, fmt.Sprintf("unshare %s: %v: %s", strings.Join(f, " "), err, bytes.TrimSpace(out)))
		}
		c.err = fmt.Errorf("cannot make a PID namespace here (needs root or user namespaces): %s", strings.Join(tried, "; "))
	})
	return c.path, c.flags, c.err
}

// InPIDNamespace runs the calling top-level test or benchmark inside a
// fresh PID namespace with its own /proc, where the test binary is pid 1
// and sees only the processes it starts: nothing outside the test can ever
// be signalled, and when it exits the kernel kills every process left in
// the namespace.
//
// Outside, it re-runs the test binary under unshare with -test.run (or
// -test.bench) selecting tb alone and env added to its environment,
// reports its output, fails tb if it failed, and returns false: the caller
// returns. Inside, it returns true: the caller runs its body.
//
// Where no PID namespace can be made, a test is skipped (failed in CI, see
// SkipOrFail) and a benchmark is skipped.
func InPIDNamespace(tb testing.TB, env ...string) bool {
	tb.Helper()
	if os.Getenv(envNamespace) != "" {
		if os.Getpid() != 1 {
			tb.Fatalf("pid %d, want 1: not in a fresh PID namespace, refusing to send signals", os.Getpid())
		}
		return true
	}

	path, flags, err := unshare()
	_, isBench := tb.(*testing.B)
	switch {
	case err != nil && isBench:
		tb.Skipf("no PID namespace, no benchmark: %v", err)
	case err != nil:
		SkipOrFail(tb, "%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}

	timeout := namespaceTimeout
	if t, ok := tb.(*testing.T); ok {
		if dl, ok := t.Deadline(); ok && time.Until(dl)-5*time.Second < timeout {
			timeout = max(time.Until(dl)-5*time.Second, 10*time.Second)
		}
	}
	only := "^" + regexp.QuoteMeta(tb.Name()) + "$"
	args := append(append([]string{}, flags...), "--", exe, "-test.run="+only)
	if isBench {
		args = append(append([]string{}, flags...), "--", exe, "-test.run=^$", "-test.bench="+only, "-test.benchtime=1x")
	}
	args = append(args, "-test.v", "-test.count=1", "-test.timeout="+(timeout-time.Second).String())

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(append(os.Environ(), envNamespace+"=1"), env...)
	// Should this test binary die, unshare dies too, and with it
	// (--kill-child) the namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var out binary.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	output := out.String()
	// A benchmark's output is shown by the benchmark; keep the inside's
	// output for its failures.
	if !isBench || err != nil {
		tb.Logf("%s in a PID namespace:\n%s", tb.Name(), Indent(output))
	}
	switch {
	case ctx.Err() != nil:
		tb.Fatalf("%s in a PID namespace: still running after %s", tb.Name(), timeout)
	case err != nil:
		tb.Fatalf("%s in a PID namespace: %v", tb.Name(), err)
	case !isBench && strings.Contains(output, "--- SKIP: "+tb.Name()+" "):
		tb.Skipf("skipped in the PID namespace")
	case !isBench && !strings.Contains(output, "--- PASS: "+tb.Name()+" "):
		tb.Fatalf("%s did not pass in the PID namespace", tb.Name())
	}
	return false
}
