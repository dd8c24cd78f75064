//go:build !linux

package config

import (
	"errors"
	"fmt"
	"runtime"
)

// buildSignalTarget refuses --signal: signals are sent through /proc and
// pidfds, which only Linux has.
func (c *Config) buildSignalTarget() error {
	s := c.Signal
	if s.Signal == "" && s.ProcessName == "" && s.ProcessCmdline == "" && s.PIDFile == "" && !s.Force {
		return nil
	}
	if s.Signal == "" {
		return errors.New("--process-name, --process-cmdline, --pid-file and --signal-force need --signal")
	}
	return fmt.Errorf("--signal %s: signalling works on Linux only, this hotreload is built for %s; use --webhook-url", s.Signal, runtime.GOOS)
}
