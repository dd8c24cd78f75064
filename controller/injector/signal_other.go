//go:build !linux

package injector

import (
	"errors"
	"strings"
)

// checkSignal lets the sidecar check a signal's name: signals are Linux's,
// and the controller is built for Linux (this keeps it building elsewhere).
func checkSignal(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty")
	}
	return nil
}
