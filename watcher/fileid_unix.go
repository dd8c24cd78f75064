//go:build unix

package watcher

import (
	"os"
	"syscall"
)

// fileID identifies a directory independently of the path that reached it.
type fileID struct {
	dev, ino uint64
	path     string // used only where the system has no inode numbers
}

func idOf(path string, info os.FileInfo) fileID {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
	}
	return fileID{path: path}
}

// openRegular opens name for reading without blocking on a FIFO that took
// a regular file's place.
func openRegular(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
