package watcher

import (
	"os"
	"syscall"
)

// stampOf returns what info (a stat of a regular file) shows of it for the
// digest cache.
func stampOf(info os.FileInfo) fileStamp {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}
	}
	return fileStamp{
		dev: uint64(st.Dev), ino: uint64(st.Ino),
		size:  int64(st.Size),
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ok:    true,
	}
}
