package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunNeedsRoot: make e2e as a user who is not root stops at once with
// one line that says why, before it installs or starts anything.
func TestRunNeedsRoot(t *testing.T) {
	cmd := exec.Command("bash", "run.sh")
	if os.Geteuid() == 0 {
		// Drop to nobody, as a contributor without root would run it, on a
		// copy of the script in a directory nobody may read (the clone may
		// sit in one only root can enter).
		script, err := os.ReadFile("run.sh")
		if err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "run-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(dir, "run.sh")
		if err := os.WriteFile(copied, script, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", copied)
		cmd.Dir = dir
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("run.sh as a user who is not root succeeded:\n%s", out)
	}
	got := strings.TrimSpace(string(out))
	if want := "make e2e: needs root"; !strings.HasPrefix(got, want) || strings.Contains(got, "\n") {
		t.Fatalf("run.sh as a user who is not root printed %q; want one line starting %q", got, want)
	}
}
