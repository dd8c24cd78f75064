// Package e2etest is test support, for the tests and benchmarks that run
// hotreload as a real process (cmd/hotreload) or run tests in a PID
// namespace (procsignal, cmd/hotreload): a Proc bound to a testing.TB, a
// recording webhook target (App), kubelet payloads and the wait for a
// volume's reload to settle, the PID-namespace harness and the skip-or-fail
// rule for missing tools. Programs never link it; they use
// test/support/binary and test/support/poll.
//
// Tests run hotreload as the test binary itself, re-executed as main (see
// RunMain), so hotreload runs with the test's race detector. Benchmarks
// measure what ships: a binary built as the Makefile builds it (Release).
//
// Nothing here sleeps to wait for an event: every wait polls a condition
// until a deadline, with test/support/poll.
package e2etest

import (
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	promversion "github.com/prometheus/common/version"

	"github.com/hotreload/hotreload/internal/version"
	"github.com/hotreload/hotreload/test/support/binary"
)

// TestVersion and TestRevision are the build identity of the hotreload that
// tests run (the re-executed test binary and Release), so that tests can
// check hotreload_build_info by value.
const (
	TestVersion  = "e2e"
	TestRevision = "e2e"
)

// envMain, in the environment of a re-executed test binary, makes RunMain
// run hotreload. It does not start with HOTRELOAD_, which hotreload reads
// its flags from.
const envMain = "E2ETEST_RUN_HOTRELOAD_MAIN"

// RunMain runs main instead of the tests when this test binary was started
// by Start or Run as hotreload; main must exit. Call it first in TestMain.
func RunMain(main func()) {
	if os.Getenv(envMain) == "" {
		return
	}
	promversion.Version, promversion.Revision = TestVersion, TestRevision
	version.Version, version.Revision = TestVersion, TestRevision
	main()
	os.Exit(0) // main returned without exiting: that is success
}

// self is how Start runs hotreload by default: this test binary, asked by
// envMain to run main.
func self(tb testing.TB) (string, []string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("find the test binary: %v", err)
	}
	return exe, []string{envMain + "=1"}
}

var release struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Release builds hotreload as the Makefile does (static, stripped; see
// binary.Build), once per test binary, and returns its path.
// Benchmarks run it, since memory and latency depend on how it is built.
// Call Cleanup from TestMain to remove it.
func Release(tb testing.TB) string {
	tb.Helper()
	release.once.Do(func() {
		release.dir, release.err = os.MkdirTemp("", "hotreload-e2etest-")
		if release.err != nil {
			return
		}
		release.path, release.err = binary.Build(release.dir, TestVersion, TestRevision)
	})
	if release.err != nil {
		tb.Fatalf("build hotreload: %v", release.err)
	}
	return release.path
}

// Cleanup removes the binary that Release built, if any.
func Cleanup() {
	if release.dir != "" {
		os.RemoveAll(release.dir)
	}
}

// SkipOrFail skips the test where a prerequisite is missing on this machine
// (a tool, a permission), but fails it in CI (CI=true), which provides
// everything.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format+" (CI=true: it must be there)", args...)
	}
	tb.Skipf(format+" (CI=true makes this a failure)", args...)
}

// Indent indents every line of s by a tab, for output quoted in a test log.
func Indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// FreeAddr returns 127.0.0.1:port with a port that nothing listened on a
// moment ago: a server can take it, and a connection to it is refused.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		tb.Fatal(err)
	}
	return addr
}
