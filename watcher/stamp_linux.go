package watcher

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// stampOf returns what info (a stat) shows of a file or directory.
func stampOf(info os.FileInfo) fileStamp {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}
	}
	return fileStamp{
		dev: uint64(st.Dev), ino: uint64(st.Ino),
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ok:    true,
	}
}

// statStamp stats path, following symlinks, and returns its stamp.
func statStamp(path string) (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileStamp{}, err
	}
	return fileStamp{
		dev: st.Dev, ino: st.Ino,
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ok:    true,
	}, nil
}
