//go:build linux

package injector

import "github.com/hotreload/hotreload/signal"

// checkSignal checks a signal's name as the sidecar will.
func checkSignal(s string) error {
	_, err := signal.Parse(s)
	return err
}
