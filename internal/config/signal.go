//go:build linux

package config

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/procsignal"
)

// newSignalTarget checks the flags of the signal target and builds it.
func newSignalTarget(s SignalConfig) (notifier.Target, error) {
	sig, err := procsignal.Parse(s.Signal)
	if err != nil {
		return nil, fmt.Errorf("--signal %q: %w", s.Signal, err)
	}
	if s.ProcessName == "" && s.ProcessCmdline == "" && s.PIDFile == "" {
		return nil, errors.New("one of --process-name, --process-cmdline, --pid-file is required with --signal")
	}
	if s.ProcessCmdline != "" {
		if _, err := regexp.Compile(s.ProcessCmdline); err != nil {
			return nil, fmt.Errorf("--process-cmdline: %w", err)
		}
	}
	n, err := procsignal.New(procsignal.Options{
		Signal:         sig,
		ProcessName:    s.ProcessName,
		ProcessCmdline: s.ProcessCmdline,
		PIDFile:        s.PIDFile,
		Force:          s.Force,
		ConfirmTimeout: s.ConfirmTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("--signal %s: %w", s.Signal, err)
	}
	return n, nil
}

// newRestartTarget builds the target of --restart-container, which finds
// the app's process with the flags of the signal target; checkFleet has
// checked that one of them is given.
func newRestartTarget(s SignalConfig, f FleetConfig) (notifier.Target, error) {
	if s.ProcessCmdline != "" {
		if _, err := regexp.Compile(s.ProcessCmdline); err != nil {
			return nil, fmt.Errorf("--process-cmdline: %w", err)
		}
	}
	r, err := procsignal.NewRestarter(procsignal.RestartOptions{
		ProcessName:    s.ProcessName,
		ProcessCmdline: s.ProcessCmdline,
		PIDFile:        s.PIDFile,
		Grace:          f.RestartGrace,
		Timeout:        f.RestartTimeout,
		Settle:         f.RestartSettle,
		Drain:          f.RestartDrain,
	})
	if err != nil {
		return nil, fmt.Errorf("--restart-container: %w", err)
	}
	return r, nil
}
