// Package binary builds the hotreload command and runs it as a process, the
// way a pod would: it starts it on a free port, captures its logs, reads its
// endpoints and metrics, and stops it with SIGTERM. The demo
// (examples/demo) runs hotreload with it, and the tests do through
// test/support/e2etest, which adds what needs a testing.TB. It imports no
// testing package, so a program can link it.
package binary

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Package is the import path of the command that Build builds.
const Package = "github.com/hotreload/hotreload/cmd/hotreload"

// VersionPackage holds the build's identity, set with -X as the Makefile
// does (a test keeps the two equal).
const VersionPackage = "github.com/prometheus/common/version"

// LDFlags are the linker flags of a release build that says it is version
// and revision. An empty revision is left to go build, which records the
// VCS revision that prometheus/common/version reports.
func LDFlags(version, revision string) string {
	f := "-s -w -X " + VersionPackage + ".Version=" + version
	if revision != "" {
		f += " -X " + VersionPackage + ".Revision=" + revision
	}
	return f
}

// Build compiles the hotreload command into dir the way the Makefile does
// (static, trimmed paths, stripped) and returns the binary's
// path. It must run inside the module, as `go test` and `go run` do.
func Build(dir, version, revision string) (string, error) {
	bin := filepath.Join(dir, "hotreload")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", LDFlags(version, revision), "-o", bin, Package)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", Package, err, out.Bytes())
	}
	return bin, nil
}
