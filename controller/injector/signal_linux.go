//go:build linux

package injector

import "github.com/hotreload/hotreload/procsignal"

// checkSignal checks a signal's name as the sidecar will.
func checkSignal(s string) error {
	_, err := procsignal.Parse(s)
	return err
}
