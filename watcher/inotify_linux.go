package watcher

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// inotify is one Linux inotify instance, used directly rather than through
// fsnotify: inotify watches a directory (an inode), and its watch
// descriptor says which, whatever path reached it. A renamed directory keeps
// its descriptor, and adding a watch for a second path to it returns the same
// one. fsnotify names a watch by the first path it was added under, keeps
// that name when the directory moves, and removing the old name removes the
// watch the new path relies on.
type inotify struct {
	fd   int
	file *os.File // the descriptor through the runtime's poller: Close wakes a blocked Read
}

// inotifyMask is every change of a directory's entries or of the directory
// itself. IN_ONLYDIR: only directories are watched.
const inotifyMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

func newInotify() (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	return &inotify{fd: fd, file: os.NewFile(uintptr(fd), "inotify")}, nil
}

// add watches the directory dir and returns its watch descriptor.
func (in *inotify) add(dir string) (int, error) {
	wd, err := unix.InotifyAddWatch(in.fd, dir, inotifyMask)
	if err != nil {
		return 0, &fs.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	return wd, nil
}

// remove drops a watch. The kernel has dropped the watch of a deleted
// directory by itself; that error is of no interest.
func (in *inotify) remove(wd int) { _, _ = unix.InotifyRmWatch(in.fd, uint32(wd)) }

func (in *inotify) close() error { return in.file.Close() }

// read waits for events and calls f for each one read; it fails once in
// is closed. buf holds at least one event with the longest name.
func (in *inotify) read(buf []byte, f func(event)) error {
	n, err := in.file.Read(buf)
	if err != nil {
		return err
	}
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		// struct inotify_event: wd, mask, cookie, len, name (NUL-padded).
		wd := int32(binary.NativeEndian.Uint32(buf[off:]))
		mask := binary.NativeEndian.Uint32(buf[off+4:])
		size := int(binary.NativeEndian.Uint32(buf[off+12:]))
		off += unix.SizeofInotifyEvent
		name := buf[off : off+size]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		off += size
		f(event{
			wd:       int(wd),
			name:     string(name),
			overflow: mask&unix.IN_Q_OVERFLOW != 0,
			gone:     mask&unix.IN_IGNORED != 0,
			dirMoved: mask&unix.IN_ISDIR != 0 && mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_DELETE) != 0,
		})
	}
	return nil
}
