//go:build !linux

package watcher

import (
	"errors"
	"os"
)

// stampOf gives nothing here (the stat layout differs by system): no digest
// is remembered, every walk reads every file, and the resync walks.
func stampOf(os.FileInfo) fileStamp { return fileStamp{} }

func statStamp(string) (fileStamp, error) { return fileStamp{}, errors.ErrUnsupported }
