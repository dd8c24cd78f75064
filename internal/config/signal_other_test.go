//go:build !linux

package config

import (
	"runtime"
	"testing"
)

func TestSignalOnlyOnLinux(t *testing.T) {
	_, _, err := parseAll(t, "--volume-dir=/etc/config", "--signal=SIGHUP", "--process-name=nginx")
	want := "--signal SIGHUP: signalling works on Linux only, this hotreload is built for " + runtime.GOOS + "; use --webhook-url"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse = %v, want %q", err, want)
	}
}
