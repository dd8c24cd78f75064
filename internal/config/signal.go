//go:build linux

package config

import (
	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/signal"
)

// newSignalTarget builds the target of --signal. Its errors name options;
// NewTargets explains them.
func newSignalTarget(s SignalConfig) (notifier.Target, error) {
	sig, err := signal.Parse(s.Signal)
	if err != nil {
		return nil, err
	}
	return signal.New(signal.Options{
		Signal:         sig,
		ProcessName:    s.ProcessName,
		ProcessCmdline: s.ProcessCmdline,
		PIDFile:        s.PIDFile,
		Force:          s.Force,
		ConfirmTimeout: s.ConfirmTimeout,
	})
}

// newRestartTarget builds the target of --restart-container, which finds
// the app's process with the flags of the signal target.
func newRestartTarget(s SignalConfig, f FleetConfig) (notifier.Target, error) {
	return signal.NewRestarter(signal.RestartOptions{
		ProcessName:    s.ProcessName,
		ProcessCmdline: s.ProcessCmdline,
		PIDFile:        s.PIDFile,
		Grace:          f.RestartGrace,
		Timeout:        f.RestartTimeout,
		Settle:         f.RestartSettle,
	})
}
