package e2etest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// envUnprivileged marks the child that AsUnprivileged starts.
const envUnprivileged = "E2ETEST_UNPRIVILEGED"

// unprivilegedID is the uid and gid the child runs as: nobody.
const unprivilegedID = 65534

// AsUnprivileged lets a test that is about permissions run where the tests
// run as root (CI does): root reads and writes anything, so such a test
// would prove nothing. As root, it runs the calling test again, alone, in a
// copy of the test binary as uid and gid 65534 with no groups, fails the
// test if that run fails or does not run it, and returns true: the caller
// returns at once. Not as root, or in that child, it returns false and the
// test goes on in this process.
func AsUnprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	if os.Getenv(envUnprivileged) != "" {
		t.Fatal("the child meant to run as uid 65534 runs as root")
	}
	// The test binary sits in go test's work directory, which only root
	// may enter: run a copy from a directory everyone can read.
	dir, err := os.MkdirTemp("", "e2etest-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test")
	if err := copyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.Command(bin, "-test.run="+strings.Join(run, "/"), "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envUnprivileged+"=1", "HOME="+dir, "TMPDIR=/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivilegedID, Gid: unprivilegedID, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as uid %d: %v\n%s", unprivilegedID, err, Indent(string(out)))
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as uid %d, %s did not run and pass:\n%s", unprivilegedID, t.Name(), Indent(string(out)))
	}
	t.Logf("ran as uid %d: passed", unprivilegedID)
	return true
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
