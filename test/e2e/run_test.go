package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRunNeedsRoot: make e2e as a user who is not root stops at once with
// one line that says why, before it installs or starts anything.
func TestRunNeedsRoot(t *testing.T) {
	cmd := exec.Command("bash", "run.sh")
	if os.Geteuid() == 0 {
		// Drop to nobody, as a contributor without root would run it.
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "run.sh")
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
