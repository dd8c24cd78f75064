//go:build linux

package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMayHoldSecret: a volume on tmpfs (where the kubelet writes Secret,
// projected and downwardAPI volumes) may hold a Secret; one on disk (a
// ConfigMap volume) does not; one that cannot be looked at may.
func TestMayHoldSecret(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Fatalf("no /dev/shm, the tmpfs every Linux has: %v", err)
	}
	for _, tt := range []struct {
		dir  string
		want bool
	}{
		{"/dev/shm", true},
		{"/proc", false},
		{filepath.Join(t.TempDir(), "missing"), true},
	} {
		if got := MayHoldSecret(tt.dir); got != tt.want {
			t.Errorf("MayHoldSecret(%s) = %v, want %v", tt.dir, got, tt.want)
		}
	}
}
