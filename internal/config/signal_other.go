//go:build !linux

package config

import (
	"fmt"
	"runtime"

	"github.com/hotreload/hotreload/notifier"
)

// newSignalTarget refuses --signal: signals are sent through /proc and
// pidfds, which only Linux has.
func newSignalTarget(s SignalConfig) (notifier.Target, error) {
	return nil, fmt.Errorf("--signal %s: signalling works on Linux only, this hotreload is built for %s; use --webhook-url", s.Signal, runtime.GOOS)
}

// newRestartTarget refuses --restart-container, which signals through
// /proc too.
func newRestartTarget(SignalConfig, FleetConfig) (notifier.Target, error) {
	return nil, fmt.Errorf("--restart-container: restarting the app works on Linux only, this hotreload is built for %s", runtime.GOOS)
}
