//go:build linux

package config

import (
	"errors"

	"github.com/hotreload/hotreload/signal"
)

func (c *Config) buildSignalTarget() error {
	s := c.Signal
	if s.Signal == "" {
		if s.ProcessName != "" || s.ProcessCmdline != "" || s.PIDFile != "" || s.Force {
			return errors.New("--process-name, --process-cmdline, --pid-file and --signal-force need --signal")
		}
		return nil
	}
	sig, err := signal.Parse(s.Signal)
	if err != nil {
		return err
	}
	n, err := signal.New(signal.Options{
		Signal:         sig,
		ProcessName:    s.ProcessName,
		ProcessCmdline: s.ProcessCmdline,
		PIDFile:        s.PIDFile,
		Force:          s.Force,
		ConfirmTimeout: s.ConfirmTimeout,
	})
	if err != nil {
		return err
	}
	c.Targets = append(c.Targets, n)
	return nil
}
