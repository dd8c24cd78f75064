// Package e2e runs the hotreload binary as a real process, the way a pod
// would, for the end-to-end tests and benchmarks of cmd/hotreload and for the
// demo. It builds the binary, starts it with a free port, captures its logs,
// scrapes its metrics, stops it with SIGTERM and checks its exit code; App is
// a recording webhook target that can be made slow, failing or unreachable.
//
// Nothing here sleeps to wait for an event: every wait polls a condition
// until a deadline (see Eventually).
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Package is the import path of the command that Build builds.
const Package = "github.com/hotreload/hotreload/cmd/hotreload"

// TestVersion is the version that Binary links into the binary, so that
// tests can check hotreload_build_info by value.
const TestVersion = "e2e"

// GCFlags are the compiler flags of a release build, as GCFLAGS in the
// Makefile (TestBuildFlagsMatchMakefile keeps the two equal): no inlining,
// which makes the binary 1.2 MB smaller and an idle hotreload about 0.9 MiB
// smaller in resident memory, for a sidecar that is idle nearly all the time.
const GCFlags = "all=-l"

// Build compiles the hotreload command into dir the way the Makefile does
// (static, trimmed paths, stripped) with the given version and returns the
// binary's path. It must run inside the module, as `go test` and `go run`
// do.
func Build(dir, version string) (string, error) {
	bin := filepath.Join(dir, "hotreload")
	ldflags := "-s -w -X github.com/prometheus/common/version.Version=" + version +
		" -X github.com/prometheus/common/version.Revision=e2e"
	cmd := exec.Command("go", "build", "-trimpath", "-gcflags", GCFlags, "-ldflags", ldflags, "-o", bin, Package)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", Package, err, out.Bytes())
	}
	return bin, nil
}

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary builds the binary once per test binary and returns its path. Call
// Cleanup from TestMain to remove it.
func Binary(tb testing.TB) string {
	tb.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "hotreload-e2e-")
		if built.err != nil {
			return
		}
		built.path, built.err = Build(built.dir, TestVersion)
	})
	if built.err != nil {
		tb.Fatalf("build hotreload: %v", built.err)
	}
	return built.path
}

// Cleanup removes the binary that Binary built, if any.
func Cleanup() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}
