package watcher

import (
	"fmt"
	"hash"
	"io/fs"
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

// readRaw feeds d the bytes of the regular file name with plain system
// calls: an *os.File costs an allocation, a cleanup and a failed epoll
// registration per file, a third of the system calls of a small file. It
// returns the bytes read and the stamp of the file as fstat showed it before
// the read; ok is always true here.
func readRaw(d hash.Hash, name string, buf []byte) (n int64, st fileStamp, ok bool, err error) {
	fd, err := openNoEINTR(name)
	if err != nil {
		return 0, fileStamp{}, true, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer syscall.Close(fd)
	var s syscall.Stat_t
	if err := syscall.Fstat(fd, &s); err != nil {
		return 0, fileStamp{}, true, fmt.Errorf("stat %s: %w", name, err)
	}
	if s.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, fileStamp{}, true, errNotRegular
	}
	st = fileStamp{
		dev: uint64(s.Dev), ino: uint64(s.Ino),
		size:  int64(s.Size),
		mtime: s.Mtim.Nano(),
		ctime: s.Ctim.Nano(),
		ok:    true,
	}
	for {
		m, err := syscall.Read(fd, buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, fileStamp{}, true, fmt.Errorf("read %s: %w", name, err)
		case m == 0:
			return n, st, true, nil
		}
		d.Write(buf[:m])
		n += int64(m)
		if m < len(buf) && n >= st.size {
			// A short read of a regular file is its end, and the file
			// had no more bytes when it was stat'ed: the read that would
			// return 0 is saved (one system call in five for a small
			// file). Bytes appended since change its stamp and make an
			// event of their own.
			return n, st, true, nil
		}
	}
}

// openNoEINTR opens name for reading, without blocking on a FIFO that took
// a regular file's place.
func openNoEINTR(name string) (int, error) {
	for {
		fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
