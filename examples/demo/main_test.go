package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

// The demo is a program users run: it must link no test support.
func TestLinksNoTestSupport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "testing" || strings.HasSuffix(dep, "/httptest") || strings.HasSuffix(dep, "/e2etest") {
			t.Errorf("the demo links %s", dep)
		}
	}
}

// swapIdentical must make a real swap (a new version directory as ..data,
// the old one gone) with the bytes the app already reads.
func TestSwapIdentical(t *testing.T) {
	vol := kubelet.New(filepath.Join(t.TempDir(), "vol"))
	if _, err := vol.Write(v3); err != nil {
		t.Fatal(err)
	}
	before, err := os.Readlink(filepath.Join(vol.Dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := readConfig(vol.Dir)
	if err != nil {
		t.Fatal(err)
	}
	after, err := swapIdentical(vol.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(vol.Dir, "..data")); got != after || after == before {
		t.Errorf("..data -> %q after the swap, want a new version %q (was %q)", got, after, before)
	}
	if _, err := os.Stat(filepath.Join(vol.Dir, before)); !os.IsNotExist(err) {
		t.Errorf("the old version %s is still there: %v", before, err)
	}
	if got, err := readConfig(vol.Dir); err != nil || got != cfg {
		t.Errorf("config after the swap = %q, %v; want %q", got, err, cfg)
	}
	// The kubelet agrees that nothing changed.
	if changed, err := vol.Write(v3); err != nil || changed {
		t.Errorf("kubelet write of the same payload after the swap: changed=%v, %v; want false", changed, err)
	}
}
