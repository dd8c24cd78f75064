//go:build unix

package watcher

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// metaOf returns what can be seen of the file name without reading it.
func metaOf(name string) (fileMeta, error) {
	info, err := os.Stat(name)
	if err != nil {
		return fileMeta{}, err
	}
	m := fileMeta{size: info.Size(), mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		m.dev, m.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return m, nil
}

// changeTime returns the status change time of name itself (a symlink is
// not followed), or the far future if it cannot be read, so that nothing
// compares as later.
func changeTime(name string) time.Time {
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		return time.Unix(1<<62, 0)
	}
	return time.Unix(st.Ctim.Unix())
}
