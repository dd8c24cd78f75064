//go:build !linux

package watcher

import (
	"errors"
	"os"
)

// inotify is Linux's: elsewhere every volume is polled.
type inotify struct{}

func newInotify() (*inotify, error) {
	return nil, errors.New("inotify is not available on this system")
}

func (*inotify) add(string) (int, error)        { return 0, errors.ErrUnsupported }
func (*inotify) remove(int)                     {}
func (*inotify) close() error                   { return nil }
func (*inotify) read([]byte, func(event)) error { return os.ErrClosed }
